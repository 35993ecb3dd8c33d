"""The retention section: one period every record a case leaves derives its lifetime from, and
the overrides for the few that must differ (docs/operations/data-rights.md)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field

from .fields import ConfigModel, Duration, Resolved, nested, unset

DAY_S = 86400.0


class RetentionOverrides(ConfigModel):
    """Lifetimes set apart from ``retention_period`` (the setting ``retention``); each unset one
    takes what its description says."""

    state_s: Duration = unset(
        "a case's stored verdict and admitted case file (what outcomes and redeliveries read) "
        "are deleted this long after its last stage result; unset = retention_period. Keep it at least topics_s"
    )
    dlq_s: Duration = unset(
        "retention.ms of disputes.dlq: how long a dead letter can be replayed; unset = retention_period"
    )
    topics_s: Duration = unset(
        "retention.ms given to the pipeline and public topics (events, intake, focus, clues, rounds, "
        "verdicts, escalations, appeals, outcomes) when they are created; unset = retention_period"
    )
    intake_draft_s: Duration = unset(
        "an incremental case whose evidence is not closed this long after its last event is "
        "dead-lettered (draft_expired, with what was received) and forgotten; unset = retention_period"
    )
    media_s: Duration = unset(
        "a media store object is deleted this long (at most a day more) after the last put or "
        "reference that named it; unset = state_s + dlq_s; never below either"
    )
    replayed_s: Duration = unset(
        "disputes.dlq-replayed: unset = compacted and kept for good (one note per letter); set = "
        "compacted, and notes older than this deleted too"
    )
    console_s: Duration = unset(
        "the console's store forgets a case this long after its last verdict (its verdicts, "
        "escalations, record, outcomes) and dead letters this long after they failed; the rationale of a "
        "decision this old is blanked (who decided what, and the audit trail, stay). Unset = kept for good"
    )
    audit_topic_s: Duration = unset(
        "how long disputes.audit keeps entries; unset = kept for good (compacted on each entry's "
        "own id, so nothing is dropped)"
    )
    precedent_case_s: Duration = unset(
        "a historical case leaves the precedent base this long after it was decided (its "
        "decided_at), and the guidelines' provenance stops naming it; checked by the worker holding partition 0 "
        "every media_sweep_interval_s. A case without a decision date stays. Unset = kept for good"
    )
    compaction_lag_s: Duration = unset(
        "on the compacted topics created here (table changelogs, dlq-replayed, audit, erasures): "
        "segment.ms and max.compaction.lag.ms, so a value replaced or deleted (by expiry, by `erase`) leaves "
        "the log within about this long of the change; unset = a day"
    )
    tombstone_s: Duration = unset(
        "delete.retention.ms of those compacted topics: how long a tombstone (a key with no value, "
        "the key being a case id) stays readable after compaction, for readers catching up; unset = a day"
    )


# the retention settings this release folded into retention_period and retention (config/deprecated.py)
DEPRECATED_RETENTION = {
    "state_retention_s": "retention.state_s",
    "dlq_retention_s": "retention.dlq_s",
    "topic_retention_s": "retention.topics_s",
    "intake_draft_ttl_s": "retention.intake_draft_s",
    "media_retention_s": "retention.media_s",
    "replayed_retention_s": "retention.replayed_s",
    "console_retention_s": "retention.console_s",
    "audit_topic_retention_s": "retention.audit_topic_s",
    "precedent_case_retention_s": "retention.precedent_case_s",
    "compaction_lag_s": "retention.compaction_lag_s",
    "tombstone_retention_s": "retention.tombstone_s",
}


# what an unset lifetime is: the period, kept for good (no deletion), or a day
def _period(settings: Any, _: str) -> float:
    return float(settings.retention_period)


def _for_good(settings: Any, _: str) -> None:
    return None


def _a_day(settings: Any, _: str) -> float:
    return DAY_S


class RetentionSettings(BaseModel):
    """How long what a case leaves behind is kept: ``retention_period`` for the case's state, its dead
    letters, the pipeline topics and drafts (media twice it), ``retention`` for what differs."""

    # Kafka's default retention.ms: a record in a topic that is not compacted cannot be erased, so
    # the topics' retention is the bound on an erasure; state outlives them, media outlives both
    retention_period: float = Field(
        7 * DAY_S,
        gt=0,
        description="how long a case's stored state, its dead letters (replayable that long), the pipeline "
        "topics' records and an unclosed draft are kept; its media twice it (they must outlive both)",
    )
    retention: RetentionOverrides = nested(
        RetentionOverrides,
        'lifetimes set apart, any of them by itself (retention={"dlq_s": 1209600}, '
        "CYBERJURORS_RETENTION__DLQ_S): state_s, dlq_s, topics_s, intake_draft_s (unset: retention_period), "
        "media_s (unset: state_s + dlq_s), replayed_s, console_s, audit_topic_s, precedent_case_s (unset: kept "
        "for good), compaction_lag_s, tombstone_s (unset: a day)",
        names=False,
    )

    # What every reader uses: each lifetime as resolved, under the name the setting had.
    state_retention_s: ClassVar[Resolved[float]] = Resolved("retention", _period, "state_s")
    dlq_retention_s: ClassVar[Resolved[float]] = Resolved("retention", _period, "dlq_s")
    topic_retention_s: ClassVar[Resolved[float]] = Resolved("retention", _period, "topics_s")
    intake_draft_ttl_s: ClassVar[Resolved[float]] = Resolved("retention", _period, "intake_draft_s")
    replayed_retention_s: ClassVar[Resolved[float | None]] = Resolved("retention", _for_good, "replayed_s")
    console_retention_s: ClassVar[Resolved[float | None]] = Resolved("retention", _for_good, "console_s")
    audit_topic_retention_s: ClassVar[Resolved[float | None]] = Resolved("retention", _for_good, "audit_topic_s")
    precedent_case_retention_s: ClassVar[Resolved[float | None]] = Resolved("retention", _for_good, "precedent_case_s")
    compaction_lag_s: ClassVar[Resolved[float]] = Resolved("retention", _a_day)
    tombstone_retention_s: ClassVar[Resolved[float]] = Resolved("retention", _a_day, "tombstone_s")

    @property
    def media_retention(self) -> float:
        """How long a media store object is kept after its last put or reference."""
        return self.retention.media_s or self.state_retention_s + self.dlq_retention_s
