# The CyberJurors image: the `cyberjurors` command (worker, topics, produce, precedents, ...).
#   docker build -t cyberjurors .      (docker-compose.yml builds it for you)
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# The CPU build of torch first, from PyTorch's CPU index: left to sentence-transformers, pip would
# pull the CUDA build (several GB) from PyPI. Its own layer, so code changes do not re-download it.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

# Then the project and its dependencies (torch is already satisfied). README.md is the package's
# long description, so setuptools needs it.
COPY pyproject.toml README.md ./
COPY cyberjurors ./cyberjurors
RUN pip install '.[s3]' && python -c "import cyberjurors, torch; print('torch', torch.__version__)"

# Sample cases, their media (CYBERJURORS_MEDIA_ROOT=/app/examples) and the decided cases for the
# precedent base.
COPY examples ./examples

RUN useradd --create-home --uid 10001 --user-group cyberjurors \
    && mkdir -p /data \
    && chown cyberjurors:cyberjurors /data
USER cyberjurors

# JSON log lines (one object a line, with case_id, stage and trace_id) for a log pipeline to index
ENV CYBERJURORS_LOG_FORMAT=json \
    CYBERJURORS_MEDIA_ROOT=/app/examples \
    CYBERJURORS_DATADIR=/data/faust \
    CYBERJURORS_PRECEDENT_DIR=/data/precedents \
    CYBERJURORS_METRICS_PORT=9464 \
    CYBERJURORS_PROBE_PORT=9465
# Prometheus metrics (CYBERJURORS_METRICS_PORT); /livez, /readyz, /startupz (CYBERJURORS_PROBE_PORT)
EXPOSE 9464 9465

ENTRYPOINT ["cyberjurors"]
CMD ["worker"]
