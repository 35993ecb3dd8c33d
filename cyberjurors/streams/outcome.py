"""disputes.outcomes: how a case was finally decided. Counted against our verdict (the drift
counters, once per case: a redelivered outcome is not counted again, and one whose decision differs
from the counted one's is a final dead letter, ``outcome_conflict``) whether or not the precedent
base is on; with it on, learned from, and every ``redistil_after`` confirmed cases of a category on
a partition the category's guidelines are re-distilled. A human panel's decision (``source:
human_panel``) must carry a signature by a key the worker holds (evidence/signing.py): one without it
(``unsigned_outcome``), with one that does not verify (``forged_outcome``) or by a key this worker
does not hold (``outcome_unverifiable``, replayable) is a dead letter before anything is counted or learned.

For an escalated case the signed human panel's decision is the decision: any other outcome (the
platform's own jury: anyone who can write to the topic can send one) that comes first is held
(``held_outcomes.Held``, in the case's stage results), neither counted nor learned from. The
panel's decision, when it comes, is counted and learned from and the held one becomes a final dead
letter, ``outcome_superseded``; with none within ``escalation_outcome_wait_s`` the held one is
counted and learned from (``release_due``, a sweep), and a panel's decision after that stands in
its place for the precedent base, as an override does. docs/concepts/escalation.md has the diagram.

One outcome at a time (the agent's concurrency is 1, and the sweep takes the same turn): guideline
versions must not race.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from ..config import Settings
from ..errors import for_people
from ..evidence import intake, signing
from ..jury.escalation import escalation_id
from ..llm.port import LLM, LLMError
from ..observability import metrics, tracing
from ..precedents import learning
from ..precedents.base import PrecedentBase
from ..precedents.models import PrecedentError
from ..schemas import CaseFile, OutcomeReported, Verdict
from ..state import expiry
from ..state.results import StageResults
from . import held_outcomes
from .dead_letters import DeadLetters, bug, shown_time
from .held_outcomes import Held
from .intake import key_problem

log = logging.getLogger("cyberjurors.streams")


@dataclass(eq=False)
class Outcomes:
    settings: Settings
    llm: LLM
    precedents: PrecedentBase
    results: StageResults
    # "category/partition" -> case ids confirmed since the last re-distil here: emptied at redistil_after,
    # so it never holds more than categories x partitions x redistil_after ids and needs no expiry
    confirmed: MutableMapping[str, Any]
    dead_letters: DeadLetters
    # the agent's outcomes and the sweep's releases, one at a time
    turn: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    async def __call__(self, event: Any) -> None:
        with tracing.consuming(event, "outcome"):  # in the trace of whoever reported it
            try:
                async with self.turn:
                    await self.handle(event)
            except Exception as err:  # a bug must cost one outcome (kept in the DLQ), not a crash of the agent
                log.exception("outcome at offset %s failed", event.message.offset)
                await self.dead_letters.write(event, "outcome", "stage_failed", bug(err), replayable=True)

    async def handle(self, event: Any) -> None:
        try:
            outcome = OutcomeReported.model_validate_json(intake.checked_json(event.value))
        except ValidationError as err:  # would fail the same way again
            await self.dead_letters.write(event, "outcome", "invalid_outcome", for_people(err), replayable=False)
            return
        except intake.Rejected as err:  # a foreign byte-order mark, a key twice in one object
            await self.dead_letters.write(event, "outcome", "invalid_outcome", err.detail, replayable=False)
            return
        if problem := key_problem(event.message.key, outcome.case_id):  # its verdict is on its case_id's partition
            await self.dead_letters.write(event, "outcome", "key_mismatch", problem, replayable=False)
            return
        tracing.name_case(outcome.case_id)
        checked = signing.check(outcome, self.settings)
        if not checked.ok:  # before the drift counters, the stored outcome and learning: a forgery changes nothing
            # a security event, apart from the dead letter's own line (which carries the detail)
            log.warning("case %s: a human panel's decision refused, %s", outcome.case_id, checked.reason)
            await self.dead_letters.write(
                event, "outcome", checked.reason, checked.detail, replayable=checked.replayable
            )
            return
        verdict, case_file = self.final(outcome.case_id)
        if verdict is None or case_file is None:
            await self.unmatched(event, outcome)
            return
        decided = Verdict.model_validate_json(verdict)
        if outcome.escalation_id is not None and outcome.escalation_id not in self.escalations(outcome.case_id):
            # a panel's decision routed to the wrong case would be learned from, and counted, as this one's
            await self.dead_letters.write(
                event,
                "outcome",
                "invalid_outcome",
                f"escalation_id is not an escalation of case "
                f"{outcome.case_id}: a human panel's decision names the escalation it answers, "
                "as disputes.escalations gave it for this case",
                replayable=False,
            )
            return
        if self.is_settled(outcome):  # overridden (at any depth of a chain) or superseded, redelivered
            log.info("case %s: a decision since overridden or superseded, redelivered: left alone", outcome.case_id)
            return
        if decided.escalated and outcome.source != "human_panel" and await self.held_back(event, outcome):
            return
        earlier = self.count(outcome, decided)
        if earlier is not None:
            if differs := _differences(earlier, outcome):
                if _overrides(outcome, earlier) or (decided.escalated and _panel_after_wait(outcome, earlier)):
                    await self.override(event, earlier, outcome, decided, CaseFile.model_validate_json(case_file))
                elif _overrides(earlier, outcome):  # redelivered, after the override that replaced it
                    log.info("case %s: a decision since overridden, redelivered: left alone", outcome.case_id)
                else:
                    await self.conflict(event, earlier, outcome, differs)
                return
            log.info("case %s: outcome already counted, not counted again", outcome.case_id)
        if outcome.source == "human_panel":
            await self.supersede_held(outcome, event.message.partition)
        await self.learn_or_letter(event, outcome, decided, CaseFile.model_validate_json(case_file))

    async def learn_or_letter(
        self, event: Any, outcome: OutcomeReported, decided: Verdict, case_file: CaseFile, partition: int | None = None
    ) -> None:
        """Learn from the counted outcome, with the precedent base on; a failure is the event's dead letter."""
        if not self.precedents.enabled:
            return
        try:
            await self.learn(outcome, decided, case_file, event.message.partition, partition)
        except (PrecedentError, LLMError) as err:
            await self.dead_letters.write(
                event, "outcome", f"precedents_{err.kind}", for_people(err), replayable=err.replayable
            )
        except Exception as err:  # a bug must cost one event (kept in the DLQ), not the worker
            log.exception("outcome for case %s failed", outcome.case_id)
            await self.dead_letters.write(event, "outcome", "stage_failed", bug(err), replayable=True)

    # --- an escalated case's outcomes ----------------------------------------------------------------

    @property
    def wait_s(self) -> float:
        """How long an outcome waits for the panel's decision: never longer than a case's state is kept."""
        return min(self.settings.escalation_outcome_wait_s, self.settings.state_retention_s)

    def is_settled(self, outcome: OutcomeReported) -> bool:
        """Whether this is a decision that finished without standing: overridden, or superseded."""
        return held_outcomes.entry(outcome, _decision(outcome)) in held_outcomes.settled(self.results, outcome.case_id)

    async def held_back(self, event: Any, outcome: OutcomeReported) -> bool:
        """An outcome that is not the human panel's, for an escalated case: held until the panel
        decides (or escalation_outcome_wait_s passes), superseded when the panel has decided, or a
        conflict with the one held. False when it goes on as any outcome: the one counted already
        (at the end of its wait), redelivered, which learning may still need (a replayed letter)."""
        case_id = outcome.case_id
        counted = self.results.stored(case_id, "outcome")
        if counted is not None:
            earlier = OutcomeReported.model_validate_json(counted)
            if not _differences(earlier, outcome):
                return False
            if earlier.source != "human_panel":
                return False  # another platform outcome than the one counted: a conflict, as for any case
            await self.superseded(event, outcome, earlier, event.message.partition)
            return True
        stored = self.results.stored(case_id, StageResults.HELD)
        if stored is not None:
            held = Held.decode(stored)
            waiting = OutcomeReported.model_validate_json(held.value)
            if differs := _differences(waiting, outcome):
                await self.conflict(event, waiting, outcome, differs, held=True)
            else:
                log.info("case %s: the outcome held for the human panel's decision, redelivered", case_id)
            return True
        record = Held.of(event, outcome, self.results.clock(), self.results.max_bytes)
        self.results.hold_outcome(case_id, record.encode(), event.message.partition)
        log.info(
            "case %s is escalated: its outcome (%s) is held for the human panel's decision, neither counted "
            "nor learned from until it comes or escalation_outcome_wait_s=%g passes",
            case_id,
            _described(outcome),
            self.wait_s,
        )
        return True

    async def superseded(
        self, event: Any, outcome: OutcomeReported, panel: OutcomeReported, partition: int | None
    ) -> None:
        """The human panel decided the escalated case: ``outcome`` is neither counted nor learned from."""
        await self.dead_letters.write(
            event,
            "outcome",
            "outcome_superseded",
            f"case {outcome.case_id} was escalated and its human panel decided ({_described(panel)}): "
            f"the panel's signed decision is the case's; this outcome ({_described(outcome)}) is "
            "neither counted nor learned from",
            replayable=False,
        )
        held_outcomes.settle(self.results, outcome.case_id, held_outcomes.entry(outcome, _decision(outcome)), partition)

    async def supersede_held(self, panel: OutcomeReported, partition: int | None) -> None:
        """The panel's decision is counted: an outcome held for it becomes its dead letter."""
        stored = self.results.stored(panel.case_id, StageResults.HELD)
        if stored is None:
            return
        held = Held.decode(stored)
        waiting = OutcomeReported.model_validate_json(held.value)
        await self.superseded(held.event(panel.case_id), waiting, panel, partition)
        self.results.unhold_outcome(panel.case_id, partition)

    async def release_due(self, partitions: Collection[int] | None = None) -> int:
        """Count, and learn from, every outcome held longer than escalation_outcome_wait_s without the
        panel's decision (on ``partitions``: the ones this worker holds). Returns how many."""
        cutoff = self.results.clock() - self.wait_s
        released = 0
        for case_id, partition in self.results.held_due(cutoff, partitions):
            async with self.turn:
                await self.release(case_id, partition)
            released += 1
        return released

    async def release(self, case_id: str, partition: int | None) -> None:
        stored = self.results.stored(case_id, StageResults.HELD)
        if stored is None:  # erased or released in between: nothing waits
            self.results.unhold_outcome(case_id, partition)
            return
        held = Held.decode(stored)
        event = held.event(case_id)
        with tracing.consuming(event, "outcome"):
            try:
                await self.count_released(event, OutcomeReported.model_validate_json(held.value), held, partition)
            except Exception as err:  # a bug costs this outcome (kept in the DLQ), not the sweep
                log.exception("case %s: releasing its held outcome failed", case_id)
                await self.dead_letters.write(event, "outcome", "stage_failed", bug(err), replayable=True)
        self.results.unhold_outcome(case_id, partition)  # last: a crash before it releases it again, counted once

    async def count_released(self, event: Any, outcome: OutcomeReported, held: Held, partition: int | None) -> None:
        verdict, case_file = self.final(outcome.case_id)
        if verdict is None or case_file is None:
            await self.unmatched(event, outcome)
            return
        decided = Verdict.model_validate_json(verdict)
        log.warning(
            "case %s: no human panel's decision within escalation_outcome_wait_s=%g; the outcome held since "
            "%s (%s) is counted and learned from",
            outcome.case_id,
            self.wait_s,
            expiry_time(held.at),
            _described(outcome),
        )
        earlier = self.count(outcome, decided, partition)
        if earlier is not None and (differs := _differences(earlier, outcome)):
            await self.conflict(event, earlier, outcome, differs)
            return
        await self.learn_or_letter(event, outcome, decided, CaseFile.model_validate_json(case_file), partition)

    async def conflict(
        self, event: Any, earlier: OutcomeReported, outcome: OutcomeReported, differs: str, held: bool = False
    ) -> None:
        said = "is held already for the human panel's decision" if held else "was counted already"
        await self.dead_letters.write(
            event,
            "outcome",
            "outcome_conflict",
            f"case {outcome.case_id}: an outcome "
            f"{said} ({_described(earlier)}); this one differs in "
            f"{differs} ({_described(outcome)}). The first stands: a counter cannot "
            "take one back; neither counted nor learned from",
            replayable=False,
        )

    async def override(
        self, event: Any, earlier: OutcomeReported, outcome: OutcomeReported, decided: Verdict, case_file: CaseFile
    ) -> None:
        """A supervisor's signed override of the standing human-panel decision: it stands from now on
        and the precedent base follows it; the drift counters keep the first decision (a counter
        cannot take one back). Also the panel's decision on an escalated case that comes after the
        platform's outcome was counted at the end of its wait: the panel's stands from then on."""
        partition = event.message.partition
        self.results.replace_outcome(outcome.case_id, outcome.model_dump_json().encode(), partition)
        held_outcomes.settle(self.results, outcome.case_id, held_outcomes.entry(earlier, _decision(earlier)), partition)
        by = outcome.decided_by.reviewer if outcome.decided_by else "?"
        log.info(
            "case %s: %s's decision replaced the standing one (%s, now %s); the drift counters keep the first",
            outcome.case_id,
            by,
            _described(earlier),
            _described(outcome),
        )
        if not self.precedents.enabled:
            return
        try:
            index, _ = await self.precedents.open()
            report = await learning.learn(outcome, decided, case_file, index, self.settings, replacing=earlier)
        except (PrecedentError, LLMError) as err:
            await self.dead_letters.write(
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
            await self.dead_letters.write(
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
            await self.dead_letters.write(
                event,
                "outcome",
                "case_expired",
                f"case {outcome.case_id} was decided at "
                f"{shown_time(outcome.decided_at)}, longer ago than {retention}, and "
                "nothing is kept for it: its verdict, if it had one, has expired",
                replayable=False,
            )
        else:
            await self.dead_letters.write(
                event,
                "outcome",
                "unknown_case",
                f"no verdict for case {outcome.case_id} yet: replay the letter once the case is decided",
                replayable=True,
            )

    def count(self, outcome: OutcomeReported, decided: Verdict, partition: int | None = None) -> OutcomeReported | None:
        """The drift counters and a human panel's agreement, once per case: the first outcome reported
        for it stays counted (a counter cannot take one back), as the precedent base applies a case's
        outcome once. Returns the outcome counted before this one, if any (this one is then not counted)."""
        if not self.results.mark_outcome(outcome.case_id, outcome.model_dump_json().encode(), partition):
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

    async def learn(
        self, outcome: OutcomeReported, decided: Verdict, case_file: CaseFile, partition: int, written: int | None
    ) -> None:
        """``partition`` groups the re-distil count; ``written`` is the changelog partition to write it
        to outside an event (the sweep's release), None inside one."""
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
        expiry.put(self.confirmed, key, pending, written)


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


def _panel_after_wait(later: OutcomeReported, earlier: OutcomeReported) -> bool:
    """Whether ``later`` is the human panel's (signed: checked by then) decision on an escalated
    case whose counted outcome is not a panel's: the platform's, counted at the end of its wait."""
    return later.source == "human_panel" and earlier.source != "human_panel"


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


def expiry_time(at: float) -> str:
    return shown_time(datetime.fromtimestamp(at, UTC))


def _described(outcome: OutcomeReported) -> str:
    shown = [f"{name} {value}" for name, value in _decision(outcome).items() if value is not None]
    decided = [f"decided_at {shown_time(outcome.decided_at)}"] if outcome.decided_at is not None else []
    return ", ".join(shown + decided)
