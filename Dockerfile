# The CyberJurors image: the `cyberjurors` command (worker, topics, produce, precedents, ...).
#   docker build -t cyberjurors .      (docker-compose.yml builds it for you)
# Two stages: the first installs the locked packages into a venv and fetches the embedding model
# (each file checked against its pinned sha256); the second carries that venv, the model and the
# sample cases, with no compiler, no pip cache and no root user.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# The production backends beside the core (rocksdb tables, Elasticsearch, S3 media, AWS KMS) and the web
# console; no torch, no embedded broker. Every package pinned and hashed: requirements/image.txt.
COPY requirements/image.txt requirements/build.txt /src/requirements/
RUN python -m venv /opt/cyberjurors \
    && /opt/cyberjurors/bin/pip install --require-hashes --no-deps -r /src/requirements/build.txt \
    && /opt/cyberjurors/bin/pip install --require-hashes --no-deps -r /src/requirements/image.txt

# README.md is the package's long description and LICENSE its licence file, so setuptools needs both
COPY pyproject.toml README.md LICENSE /src/
COPY cyberjurors /src/cyberjurors
RUN /opt/cyberjurors/bin/pip install --no-deps --no-build-isolation /src \
    && /opt/cyberjurors/bin/cyberjurors embedder fetch --to /opt/cyberjurors/share/cyberjurors/models/all-MiniLM-L6-v2 \
    && /opt/cyberjurors/bin/pip uninstall -y pip setuptools \
    && /opt/cyberjurors/bin/python -m compileall -q /opt/cyberjurors/lib

FROM ${PYTHON_IMAGE}

ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="cyberjurors" \
      org.opencontainers.image.description="Streaming e-commerce dispute verdicts by a simulated LLM jury" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.documentation="README.md and docs/ in the source repository"

ENV PATH=/opt/cyberjurors/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

RUN useradd --create-home --uid 10001 --user-group cyberjurors \
    && mkdir -p /data \
    && chown cyberjurors:cyberjurors /data

COPY --from=build /opt/cyberjurors /opt/cyberjurors
WORKDIR /app
# Sample cases, their media (CYBERJURORS_MEDIA_ROOT=/app/examples) and the decided cases for the
# precedent base.
COPY examples ./examples
# The commit the image is built from (docker build --build-arg REVISION=$(git rev-parse HEAD) .), where the
# package reads it for cyberjurors_build_info{revision}: an installed package has no .git to ask. Last, so a
# new revision rebuilds only this small layer.
RUN mkdir -p /opt/cyberjurors/share/cyberjurors \
    && printf '%s\n' "${REVISION}" > /opt/cyberjurors/share/cyberjurors/revision
USER 10001:10001

# JSON log lines (one object a line, with case_id, stage and trace_id) for a log pipeline to index.
# The model lies where a worker looks by default; mount a vetted copy elsewhere and set
# CYBERJURORS_EMBEDDING__MODEL_DIR to use that instead.
ENV CYBERJURORS_LOG_FORMAT=json \
    CYBERJURORS_MEDIA_ROOT=/app/examples \
    CYBERJURORS_DATADIR=/data/faust \
    CYBERJURORS_PRECEDENT_DIR=/data/precedents \
    CYBERJURORS_METRICS_PORT=9464 \
    CYBERJURORS_PROBE_PORT=9465
# Prometheus metrics (CYBERJURORS_METRICS_PORT); /livez, /readyz, /startupz (CYBERJURORS_PROBE_PORT);
# `cyberjurors console` (CYBERJURORS_CONSOLE_PORT). Each listens on loopback unless its *_HOST says otherwise.
EXPOSE 9464 9465 8080

ENTRYPOINT ["cyberjurors"]
CMD ["worker"]
