"""disputes.outcomes: how a case was finally decided. Counted against our verdict (the drift
counters, once per case: a redelivered outcome is not counted again, and one whose decision differs
from the counted one's is a final dead letter, ``outcome_conflict``) whether or not the precedent
base is on; with it on, learned from, and every ``redistil_after`` confirmed cases of a category on
a partition the category's guidelines are re-distilled. A human panel's decision (``source:
human_panel``) must carry a signature by a key the worker holds (streams/signing.py): one without it
(``unsigned_outcome``), with one that does not verify (``forged_outcome``) or by a key this worker
does not hold (``outcome_unverifiable``, replayable) is a dead letter before anything is counted or learned.

One outcome at a time (the agent's concurrency is 1): guideline versions must not race.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

from pydantic import ValidationError

from ..config import Settings
from ..errors import for_people
from ..evidence import intake
from ..jury.escalation import escalation_id
from ..llm.port import LLM, LLMError
from ..observability import metrics, tracing
from ..precedents import learning
from ..precedents.base import PrecedentBase
from ..precedents.models import PrecedentError
from ..schemas import CaseFile, OutcomeReported, Verdict
from ..state.results import StageResults
from . import signing
from .dead_letters import DeadLetters, bug, shown_time
from .intake import key_problem

log = logging.getLogger("cyberjurors.streams")


class Outcomes:
    def __init__(
        self,
        settings: Settings,
        llm: LLM,
        precedents: PrecedentBase,
        results: StageResults,
        confirmed: MutableMapping[str, Any],
        letters: DeadLetters,
    ):
        self.settings = settings
        self.llm = llm
        self.precedents = precedents
        self.results = results
        # "category/partition" -> case ids confirmed since the last re-distil here: emptied at redistil_after,
        # so it never holds more than categories x partitions x redistil_after ids and needs no expiry
        self.confirmed = confirmed
        self.letters = letters

    async def __call__(self, event: Any) -> None:
        with tracing.consuming(event, "outcome"):  # in the trace of whoever reported it
            try:
                await self.handle(event)
            except Exception as err:  # a bug must cost one outcome (kept in the DLQ), not a crash of the agent
                log.exception("outcome at offset %s failed", event.message.offset)
                await self.letters.write(event, "outcome", "stage_failed", bug(err), replayable=True)

    async def handle(self, event: Any) -> None:
        try:
            outcome = OutcomeReported.model_validate_json(intake.checked_json(event.value))
        except ValidationError as err:  # would fail the same way again
            await self.letters.write(event, "outcome", "invalid_outcome", for_people(err), replayable=False)
            return
        except intake.Rejected as err:  # a foreign byte-order mark, a key twice in one object
            await self.letters.write(event, "outcome", "invalid_outcome", err.detail, replayable=False)
            return
        if problem := key_problem(event.message.key, outcome.case_id):  # its verdict is on its case_id's partition
            await self.letters.write(event, "outcome", "key_mismatch", problem, replayable=False)
            return
        tracing.name_case(outcome.case_id)
        checked = signing.check(outcome, self.settings)
        if not checked.ok:  # before the drift counters, the stored outcome and learning: a forgery changes nothing
            # a security event, apart from the dead letter's own line (which carries the detail)
            log.warning("case %s: a human panel's decision refused, %s", outcome.case_id, checked.reason)
            await self.letters.write(event, "outcome", checked.reason, checked.detail, replayable=checked.replayable)
            return
        verdict, case_file = self.final(outcome.case_id)
        if verdict is None or case_file is None:
            await self.unmatched(event, outcome)
            return
        decided = Verdict.model_validate_json(verdict)
        if outcome.escalation_id is not None and outcome.escalation_id not in self.escalations(outcome.case_id):
            # a panel's decision routed to the wrong case would be learned from, and counted, as this one's
            await self.letters.write(
                event,
                "outcome",
                "invalid_outcome",
                f"escalation_id is not an escalation of case "
                f"{outcome.case_id}: a human panel's decision names the escalation it answers, "
                "as disputes.escalations gave it for this case",
                replayable=False,
            )
            return
        earlier = self.count(outcome, decided)
        if earlier is not None:
            if differs := _differences(earlier, outcome):
                if _overrides(outcome, earlier):
                    await self.override(event, earlier, outcome, decided, CaseFile.model_validate_json(case_file))
                elif _overrides(earlier, outcome):  # redelivered, after the override that replaced it
                    log.info("case %s: a decision since overridden, redelivered: left alone", outcome.case_id)
                else:
                    await self.conflict(event, earlier, outcome, differs)
                return
            log.info("case %s: outcome already counted, not counted again", outcome.case_id)
        if not self.precedents.enabled:
            return
        try:
            await self.learn(outcome, decided, CaseFile.model_validate_json(case_file), event.message.partition)
        except (PrecedentError, LLMError) as err:
            await self.letters.write(
                event, "outcome", f"precedents_{err.kind}", for_people(err), replayable=err.replayable
            )
        except Exception as err:  # a bug must cost one event (kept in the DLQ), not the worker
            log.exception("outcome for case %s failed", outcome.case_id)
            await self.letters.write(event, "outcome", "stage_failed", bug(err), replayable=True)

    async def conflict(self, event: Any, earlier: OutcomeReported, outcome: OutcomeReported, differs: str) -> None:
        await self.letters.write(
            event,
            "outcome",
            "outcome_conflict",
            f"case {outcome.case_id}: an outcome "
            f"was counted already ({_described(earlier)}); this one differs in "
            f"{differs} ({_described(outcome)}). The first stands: a counter cannot "
            "take one back; neither counted nor learned from",
            replayable=False,
        )

    async def override(
        self, event: Any, earlier: OutcomeReported, outcome: OutcomeReported, decided: Verdict, case_file: CaseFile
    ) -> None:
        """A supervisor's signed override of the standing human-panel decision: it stands from now on
        and the precedent base follows it; the drift counters keep the first decision (a counter
        cannot take one back)."""
        self.results.replace_outcome(outcome.case_id, outcome.model_dump_json().encode())
        by = outcome.decided_by.reviewer if outcome.decided_by else "?"
        log.info(
            "case %s: %s overrode the human panel's decision (%s, now %s); the drift counters keep the first",
            outcome.case_id,
            by,
            _described(earlier),
            _described(outcome),
        )
        if not self.precedents.enabled:
            return
        try:
            index, _ = await self.precedents.open()
            report = await learning.overridden(earlier, outcome, decided, case_file, index, self.settings)
        except (PrecedentError, LLMError) as err:
            await self.letters.write(
                event, "outcome", f"precedents_{err.kind}", for_people(err), replayable=err.replayable
            )
            return
        log.info(
            "case %s: the precedent base follows the override: case %s, raised %s, lowered %s, retired %s",
            outcome.case_id,
            report.case_added or "removed",
            report.raised,
            report.lowered,
            report.retired,
        )

    def final(self, case_id: str) -> tuple[bytes | None, bytes | None]:
        """The case's last word and the case file it judged: an appeal's verdict on the appealed case
        (new evidence included), else the first-instance verdict on the admitted case."""
        appealed = self.results.stored(case_id, "appeal/verdict")
        if appealed is not None:
            return appealed, self.results.stored(case_id, "appeal")
        return self.results.stored(case_id, "verdict"), self.results.stored(case_id, "intake")

    def escalations(self, case_id: str) -> set[str]:
        """The ids of the case's escalations: its first-instance verdict's and its appeal verdict's, when escalated."""
        ids = set()
        for stage in ("verdict", "appeal/verdict"):
            stored = self.results.stored(case_id, stage)
            if stored is not None and (verdict := Verdict.model_validate_json(stored)).escalated:
                ids.add(escalation_id(verdict))
        return ids

    async def unmatched(self, event: Any, outcome: OutcomeReported) -> None:
        """An outcome with no verdict to compare: final when the case's verdict has expired (its
        marker is stored, or the outcome was decided longer than the retention ago with nothing kept
        for the case), since no replay can bring the verdict back; else it may have come before its
        verdict, and a replay later may find it."""
        retention = f"state_retention_s={self.settings.state_retention_s:g}"
        decided_at = outcome.decided_at.timestamp() if outcome.decided_at is not None else None
        if self.results.stored(outcome.case_id, StageResults.EXPIRED) is not None:
            await self.letters.write(
                event,
                "outcome",
                "case_expired",
                f"case {outcome.case_id} was decided and its "
                f"verdict has expired ({retention}): nothing left to compare or learn from",
                replayable=False,
            )
        elif (
            outcome.decided_at is not None  # (so decided_at is too)
            and self.results.older_than_retention(decided_at)
            and self.results.stored(outcome.case_id, "intake") is None
        ):
            await self.letters.write(
                event,
                "outcome",
                "case_expired",
                f"case {outcome.case_id} was decided at "
                f"{shown_time(outcome.decided_at)}, longer ago than {retention}, and "
                "nothing is kept for it: its verdict, if it had one, has expired",
                replayable=False,
            )
        else:
            await self.letters.write(
                event,
                "outcome",
                "unknown_case",
                f"no verdict for case {outcome.case_id} yet: replay the letter once the case is decided",
                replayable=True,
            )

    def count(self, outcome: OutcomeReported, decided: Verdict) -> OutcomeReported | None:
        """The drift counters and a human panel's agreement, once per case: the first outcome reported
        for it stays counted (a counter cannot take one back), as the precedent base applies a case's
        outcome once. Returns the outcome counted before this one, if any (this one is then not counted)."""
        if not self.results.mark_outcome(outcome.case_id, outcome.model_dump_json().encode()):
            return OutcomeReported.model_validate_json(self.results.stored(outcome.case_id, "outcome") or b"")
        real, ours = outcome.votes, decided.votes
        metrics.record_outcome(decided.category, real.buyer, real.seller, ours.buyer, ours.seller)
        if outcome.source == "human_panel" and decided.escalated:
            agreed = real.winner == decided.winner
            metrics.HUMAN_DECISIONS.labels("agree" if agreed else "disagree").inc()
            log.info(
                "case %s: the human panel %s the escalated verdict (%s)",
                outcome.case_id,
                "upheld" if agreed else "overturned",
                ", ".join(decided.escalation_reasons),
            )
        return None

    async def learn(self, outcome: OutcomeReported, decided: Verdict, case_file: CaseFile, partition: int) -> None:
        index, matcher = await self.precedents.open()
        report = await learning.learn(outcome, decided, case_file, index, self.settings)
        log.info(
            "case %s: outcome %s our verdict; added %s, raised %s, lowered %s, retired %s",
            outcome.case_id,
            "agrees with" if report.agreed else "differs from",
            report.case_added,
            report.raised,
            report.lowered,
            report.retired,
        )
        if not report.case_added:
            return
        key = f"{decided.category}/{partition}"
        pending = sorted({*(self.confirmed.get(key) or []), report.case_added})
        if len(pending) >= self.settings.redistil_after:
            done = await learning.redistil(decided.category, pending, index, matcher.embedder, self.llm, self.settings)
            log.info(
                "re-distilled %s from %d confirmed cases: %d new guidelines, %d merged",
                decided.category,
                len(pending),
                done.guidelines_created,
                done.guidelines_merged,
            )
            pending = []
        self.confirmed[key] = pending


def _overrides(later: OutcomeReported, earlier: OutcomeReported) -> bool:
    """Whether ``later`` is a human panel's override that names ``earlier`` (its signature has been
    checked by then: only the console, or a key holder, can say so)."""
    by = later.decided_by
    return (
        later.source == "human_panel"
        and by is not None
        and by.override_of is not None
        and by.override_of == earlier.event_id
        and later.escalation_id == earlier.escalation_id
    )


def _decision(outcome: OutcomeReported) -> dict[str, Any]:
    """What an outcome says was decided, and by whom: the votes (the winner follows from them), the
    source and the escalation answered, which counting and learning judge by. Not decided_at nor the
    envelope (event_id, sent_at, schema_version): a platform resending the same decision may restamp
    them. No source is the platform's jury (the schema holds it to 17 votes)."""
    return {
        "votes": f"{outcome.votes.buyer}:{outcome.votes.seller}",
        "winner": outcome.votes.winner,
        "source": outcome.source or "platform_jury",
        "escalation_id": outcome.escalation_id,
    }


def _differences(earlier: OutcomeReported, later: OutcomeReported) -> str:
    """The fields of the decision in which two outcomes differ, named; "" for a repeat of the same decision."""
    first, then = _decision(earlier), _decision(later)
    return ", ".join(name for name in first if first[name] != then[name])


def _described(outcome: OutcomeReported) -> str:
    shown = [f"{name} {value}" for name, value in _decision(outcome).items() if value is not None]
    decided = [f"decided_at {shown_time(outcome.decided_at)}"] if outcome.decided_at is not None else []
    return ", ".join(shown + decided)
