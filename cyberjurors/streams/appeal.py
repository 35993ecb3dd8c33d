"""disputes.appeals -> the second instance -> disputes.verdicts (instance 2) and, when doubtful,
disputes.escalations.

An appeal is checked, then judged by the appeal panel (``jury/appeal.py``) inside this handler,
step by step, each step stored in ``stage-results`` before the next: ``case_id/appeal`` (the
accepted appeal's case file: it makes the case appealed, once and for all), ``appeal/clues`` (stage
II on the new evidence), ``appeal/round-N``, then the verdict (``appeal/verdict``, and
``appeal/escalation``) through ``Verdicts``. A redelivered or replayed appeal resumes after the last
stored step, so no model call is repeated, and one whose verdict is out re-sends it.

Refused, each a final dead letter at stage ``appeal``: an event that does not parse
(``invalid_appeal``), keyed other than by its case (``key_mismatch``), a second different appeal
(``appeal_already_filed``), a verdict id that is not the case's first-instance verdict
(``appeal_wrong_verdict``), an appeal by the winner (``appeal_by_winner``), one filed after
``appeal_window_s`` or with appeals off (``appeal_window_closed``), one filed before the verdict it
names was decided, beyond ``clock_skew_s`` (``appeal_before_verdict``), evidence intake's rules refuse
(``appeal_evidence_rejected``), and an appeal of a case whose state has expired (``case_expired``).
An appeal for a case with no verdict yet is ``unknown_case``, replayable.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from pydantic import ValidationError

from ..config import Settings
from ..errors import CyberJurorsError, for_people
from ..evidence import intake
from ..evidence.media_store import MediaStore
from ..jury.appeal import Remembers, appeal_clues, appeal_file, appeal_id, appeal_notes, with_evidence
from ..jury.rounds import Jury, is_settled
from ..jury.stages import round_stage, verdict_stage
from ..llm.port import LLM, LLMError
from ..observability import metrics, tracing
from ..schemas import AppealFiled, CaseFile, Verdict
from ..state.results import StageResults
from .dead_letters import DeadLetters, OutputTooLarge, bug, shown_time
from .intake import claim_check, key_problem
from .turns import CaseTurns
from .verdict import Verdicts

log = logging.getLogger("cyberjurors.streams")

STAGE = "appeal"


class Refused(CyberJurorsError):
    """Control flow inside this module: the appeal was dead-lettered."""


class Appeals:
    def __init__(
        self,
        settings: Settings,
        llm: LLM,
        precedents: Remembers,
        results: StageResults,
        verdicts: Verdicts,
        dead_letters: DeadLetters,
        store: MediaStore,
    ):
        self.settings = settings
        self.llm = llm
        self.jury = Jury.from_settings(settings, settings.appeal_jurors)
        self.precedents = precedents
        self.results = results
        self.verdicts = verdicts
        self.dead_letters = dead_letters
        self.store = store
        self.turns = CaseTurns()

    async def __call__(self, event: Any) -> None:
        with tracing.consuming(event, STAGE):
            await self.handle(event)

    async def handle(self, event: Any) -> None:
        try:
            appeal = await self.parse(event)
        except Refused:
            return
        except Exception as err:  # a bug must cost one appeal (kept in the DLQ), not a crash of the agent
            log.exception("appeal at offset %s failed", event.message.offset)
            await self.dead_letters.write(event, "appeal", "stage_failed", bug(err), replayable=True)
            return
        tracing.name_case(appeal.case_id)
        try:
            async with self.one_at_a_time(appeal.case_id):
                case_file = await self.accepted(event, appeal, appeal_id(appeal))
                await self.judge(event, case_file)
        except Refused:
            return
        except LLMError as err:  # a replay resumes after the last stored step
            await self.dead_letters.write(
                event, "appeal", f"llm_{err.kind}", for_people(err), replayable=err.replayable
            )
        except OutputTooLarge as err:
            await self.dead_letters.write(event, "appeal", "output_too_large", err.detail, replayable=False)
        except Exception as err:  # a bug must cost one appeal (kept in the DLQ to replay once fixed), not the worker
            log.exception("appeal for case %s failed", appeal.case_id)
            await self.dead_letters.write(event, "appeal", "stage_failed", bug(err), replayable=True)

    def one_at_a_time(self, case_id: str) -> contextlib.AbstractAsyncContextManager[None]:
        """A case's appeals, one after the other on this worker (every appeal of a case comes to the
        worker holding its partition): a second appeal sees the first accepted and stored, or refused;
        the same appeal delivered twice finds the first one's verdict and re-sends it."""
        return self.turns.one_at_a_time(case_id)

    async def refuse(self, event: Any, reason: str, detail: str, replayable: bool = False) -> NoReturn:
        """The appeal dead-lettered at stage ``appeal``, and its handling ended (``Refused``)."""
        await self.dead_letters.write(event, STAGE, reason, detail, replayable=replayable)
        raise Refused

    async def parse(self, event: Any) -> AppealFiled:
        size = len(event.value or b"") + len(event.message.key or b"")
        if size > self.settings.intake_limits.max_event_bytes:
            await self.refuse(
                event,
                "invalid_appeal",
                f"{size} bytes, limit max_event_bytes={self.settings.intake_limits.max_event_bytes}; send large media by path or URL",
            )
        try:
            appeal = AppealFiled.model_validate_json(intake.checked_json(event.value))
        except ValidationError as err:
            await self.refuse(event, "invalid_appeal", for_people(err))
        except intake.Rejected as err:  # a foreign byte-order mark, a key twice in one object
            await self.refuse(event, "invalid_appeal", err.detail)
        if problem := key_problem(event.message.key, appeal.case_id):  # its verdict is on its case_id's partition
            await self.refuse(event, "key_mismatch", problem)
        return appeal

    async def accepted(self, event: Any, appeal: AppealFiled, key: str) -> CaseFile:
        """The appeal's case file: the one stored when this appeal was accepted (a redelivery, a
        replay), or a new one, stored, once every check has passed."""
        case_id = appeal.case_id
        stored = self.results.stored(case_id, STAGE)
        if stored is not None:
            taken = CaseFile.model_validate_json(stored)
            if taken.appeal is not None and taken.appeal.appeal_id == key:
                return taken
            brief = taken.appeal
            await self.refuse(
                event,
                "appeal_already_filed",
                f"case {case_id} was appealed already (by the "
                f"{brief.appellant if brief else '?'}, filed {_when(brief)}); one appeal per "
                "case, and the second instance's verdict is final",
            )
        first = await self.first_verdict(event, appeal)
        await self.check(event, appeal, first)
        case_file = await self.record(event, appeal, first)
        self.results.put(case_id, STAGE, case_file.model_dump_json().encode())
        metrics.APPEALS.labels(appeal.appellant).inc()
        log.info("case %s: appeal by the %s accepted against verdict %s", case_id, appeal.appellant, first.verdict_id)
        return case_file

    async def first_verdict(self, event: Any, appeal: AppealFiled) -> Verdict:
        stored = self.results.stored(appeal.case_id, "verdict")
        if stored is not None:
            return Verdict.model_validate_json(stored)
        if self.results.stored(appeal.case_id, StageResults.EXPIRED) is not None:
            await self.refuse(
                event,
                "case_expired",
                f"case {appeal.case_id} was decided and its state has "
                f"expired (state_retention_s={self.settings.state_retention_s:g}, "
                f"appeal_window_s={self.settings.appeal_window_s:g}): nothing left to appeal",
            )
        await self.refuse(
            event,
            "unknown_case",
            f"no verdict for case {appeal.case_id} yet: replay the letter once the case is decided",
            replayable=True,
        )

    async def check(self, event: Any, appeal: AppealFiled, first: Verdict) -> None:
        """The appeal names the case's first verdict, comes from its loser, after that verdict, within the window."""
        window = self.settings.appeal_window_s
        if appeal.verdict_id != first.verdict_id:
            await self.refuse(
                event,
                "appeal_wrong_verdict",
                f"the appeal names verdict {appeal.verdict_id[:64]}; "
                f"case {appeal.case_id}'s first-instance verdict is {first.verdict_id}",
            )
        if appeal.appellant == first.winner:
            await self.refuse(
                event,
                "appeal_by_winner",
                f"the {appeal.appellant} won the first instance "
                f"({first.votes.buyer}:{first.votes.seller}); only the losing party may appeal",
            )
        if window <= 0:
            await self.refuse(event, "appeal_window_closed", "appeals are off (appeal_window_s=0)")
        skew = self.settings.clock_skew_s
        # filed_at is the platform's clock and decided_at ours: within the skew, the clocks may disagree on which
        # came first; beyond it, the appeal (year 0001 once) is not one against this verdict, and "late" below
        # would be negative and let it through
        early = (first.decided_at - appeal.filed_at).total_seconds() - skew
        if early > 0:
            await self.refuse(
                event,
                "appeal_before_verdict",
                f"filed_at {shown_time(appeal.filed_at)} is "
                f"before verdict {first.verdict_id} was decided ({shown_time(first.decided_at)}), "
                f"beyond clock_skew_s={skew:g}: an appeal can only be filed against a verdict "
                "that exists",
            )
        late = (appeal.filed_at - first.decided_at).total_seconds() - window
        if late > 0:
            await self.refuse(
                event,
                "appeal_window_closed",
                f"filed {late / 86400:.1f} days after the "
                f"window closed (appeal_window_s={window:g} from the verdict of "
                f"{first.decided_at:%Y-%m-%d %H:%M} UTC)",
            )

    async def record(self, event: Any, appeal: AppealFiled, first: Verdict) -> CaseFile:
        """The second instance's case file: the kept record with the new evidence checked like any
        evidence (intake's rules, the media claim check, max_case_bytes)."""
        base = self.results.stored(appeal.case_id, "clues") or self.results.stored(appeal.case_id, "intake")
        if base is None:  # a verdict without its record: only an older version's leftovers
            await self.refuse(event, "case_expired", f"case {appeal.case_id}'s record is no longer kept")
        record = CaseFile.model_validate_json(base)
        try:
            # intake's rules before the claim check, as at intake: inline media's base64 and size are
            # checked while they are still inline, and nothing refused reaches the media store
            intake.admit(with_evidence(record.case, appeal), self.settings)
            data = appeal.model_dump(mode="json", exclude_none=True)
            moved = await claim_check(
                self.store, data["evidence"], appeal.case_id, self.settings.intake_limits.max_media_bytes
            )
            checked = AppealFiled.model_validate(data) if moved else appeal
            case = with_evidence(record.case, checked)
            case_file = appeal_file(record, first, appeal, case, appeal_notes(record.case, case, appeal))
            size = len(case_file.model_dump_json())
            if size > self.settings.intake_limits.max_case_bytes:
                raise intake.Rejected(
                    "case_too_large",
                    f"the appealed case file is {size} bytes with its media in "
                    f"the media store, limit max_case_bytes={self.settings.intake_limits.max_case_bytes}",
                )
        except intake.Rejected as err:
            await self.refuse(event, "appeal_evidence_rejected", f"{err.reason}: {err.detail}")
        except ValidationError as err:  # an evidence id the case already uses
            await self.refuse(event, "appeal_evidence_rejected", for_people(err))
        return case_file

    async def judge(self, event: Any, case_file: CaseFile) -> None:
        """The second instance from its last stored step: stage II on the new evidence, the panel's
        rounds, the verdict. Each step is stored before the next, and a decided appeal re-sends its verdict."""
        case_id = case_file.case_id
        if await self.verdicts.resend(case_id, instance=2):
            return
        case_file = await self.step(
            case_id,
            "appeal/clues",
            case_file,
            lambda cf: appeal_clues(cf, self.jury, self.llm, self.settings, self.precedents),
        )
        while not is_settled(case_file, self.settings):
            stage = f"appeal/round-{len(case_file.rounds) + 1}"
            case_file = await self.step(
                case_id, stage, case_file, lambda cf: round_stage(cf, self.jury, self.llm, self.settings)
            )
        await self.verdicts.publish(case_file, event, lambda cf: verdict_stage(cf, self.llm, self.settings, self.jury))

    async def step(
        self, case_id: str, stage: str, case_file: CaseFile, work: Callable[[CaseFile], Awaitable[CaseFile]]
    ) -> CaseFile:
        stored = self.results.stored(case_id, stage)
        if stored is not None:
            tracing.mark(replayed=True)
            return CaseFile.model_validate_json(stored)
        done = await work(case_file)
        self.results.put(case_id, stage, done.model_dump_json().encode())
        return done


def _when(brief: Any) -> str:
    return f"{brief.filed_at:%Y-%m-%d %H:%M} UTC" if brief is not None else "earlier"
