"""Courts sized to the stakes: which court sits on a case (the court policy's tier for its order
amount and category, ``config/courts.py``) and the settings it sits with.

The court is chosen at stage I and recorded on the case file (``CaseFile.court``), and every later
stage sits with it (``seated``, ``sitting``): the worker's settings with the tier's jurors, rounds,
model and verifier in place. The stage functions apply it themselves, so the stream, the batch
evaluation and the benchmarks size a case's court alike, and a case keeps the court it started
before even if the policy changes while it is in flight.

Amounts are compared in ``court_base_currency``; a case in another currency is converted with
``court_rates``. **A currency without a rate sits before the highest tier of its category**, and
the verdict says so: an order whose value cannot be told is never sent to a smaller court than it
may deserve (the cost of the rule is a fuller court for those cases, visible on their verdicts).

A second instance is the appeal court whatever court sat first: ``appeal_jurors`` (31) on the
configured rounds, models and verifier. An appeal is final, so it gets the fullest court.
"""

from __future__ import annotations

from decimal import Decimal

from ..config import CourtSettings, CourtTier, Settings
from ..schemas import JURY_SIZE, CaseFile, CaseMetadata, Court, DisputeCase

DEFAULT_COURT = "default"  # no court_policy: the jury the other settings describe
APPEAL_COURT = "appeal"
PAPER_ROUNDS = 3  # the paper's T


def base_amount(metadata: CaseMetadata, settings: CourtSettings) -> Decimal | None:
    """The order amount in the base currency; None when its currency has no rate."""
    if metadata.currency == settings.court_base_currency:
        return metadata.order_amount
    rate = settings.court_rates.get(metadata.currency)
    return None if rate is None else metadata.order_amount * rate


def tier_for(case: DisputeCase, settings: CourtSettings) -> tuple[CourtTier | None, Decimal | None, str | None]:
    """The tier that sits on the case (None without a policy), the amount it was chosen by, and a
    note when the plain rule could not apply. The policy was checked at start: every category's
    amounts are covered exactly once, so exactly one tier is found."""
    amount = base_amount(case.metadata, settings)
    if not settings.court_policy:
        return None, amount, None
    category = case.metadata.category
    serving = [t for t in settings.court_policy if t.sits_on(category)]
    if amount is None:
        highest = max(serving, key=lambda t: t.top)
        note = (
            f"no rate for {case.metadata.currency} in court_rates: the order's value in "
            f"{settings.court_base_currency} is unknown, so the highest court for {category}, "
            f"{highest.name!r}, sat"
        )
        return highest, None, note
    return next(t for t in serving if t.min_amount <= amount < t.top), amount, None


def choose(case: DisputeCase, settings: Settings) -> Court:
    """The court for a first-instance case: its tier's values, the settings' where the tier sets none."""
    tier, amount, note = tier_for(case, settings)
    return court_for(tier, settings, amount, note)


def court_for(
    tier: CourtTier | None, settings: Settings, amount: Decimal | None = None, note: str | None = None
) -> Court:
    """What a tier seats (None: no policy, the settings' jury)."""
    given = tier or CourtTier(name="unset")  # no policy: nothing set, every value the settings'
    return Court(
        name=tier.name if tier else DEFAULT_COURT,
        jurors=given.jurors or settings.jurors,
        rounds=given.rounds or settings.rounds,
        model=given.model,
        verifier=settings.verifier if given.verifier is None else given.verifier,
        order_amount=amount,
        base_currency=settings.court_base_currency,
        note=note,
    )


def appeal_court(case_file: CaseFile, settings: Settings) -> Court:
    """The second instance's court: the appeal panel on the configured rounds, models and verifier."""
    first = case_file.court
    return Court(
        name=APPEAL_COURT,
        jurors=settings.appeal_jurors,
        rounds=settings.rounds,
        model=None,
        verifier=settings.verifier,
        order_amount=first.order_amount if first else base_amount(case_file.case.metadata, settings),
        base_currency=settings.court_base_currency,
    )


def court_of(case_file: CaseFile, settings: Settings) -> Court:
    """The court that sits on the case file: the recorded one (chosen now for a case file seated
    before courts existed), or the appeal court for a second instance."""
    if case_file.appeal is not None:
        return appeal_court(case_file, settings)
    return case_file.court or choose(case_file.case, settings)


def court_settings(settings: Settings, court: Court) -> Settings:
    """The settings a court sits with. Applying them twice changes nothing (every value is the
    court's), so a stage may apply them to settings that already are."""
    switches = settings.pipeline_overrides.model_copy(update={"verifier": court.verifier})
    update: dict[str, object] = {"jurors": court.jurors, "rounds": court.rounds, "pipeline_overrides": switches}
    if court.model:  # the tier's model for every call: the per-role and per-seat models would override it
        update |= {"model": court.model, "juror_models": [], "juris_drafter_models": []}
        update |= {
            "llm_roles": {role: call.model_copy(update={"model": None}) for role, call in settings.llm_roles.items()}
        }
    return settings.model_copy(update=update)


def sitting(settings: Settings, case_file: CaseFile) -> Settings:
    """The settings the case's court sits with; a second instance's are the configured ones (its
    panel, ``appeal_jurors``, is the appeal handler's)."""
    if case_file.appeal is not None:
        return settings
    return court_settings(settings, court_of(case_file, settings))


def seated(case_file: CaseFile, settings: Settings) -> tuple[CaseFile, Settings]:
    """The case file with its court recorded, and the settings it sits with."""
    if case_file.court is None and case_file.appeal is None:
        case_file = case_file.model_copy(update={"court": choose(case_file.case, settings)})
    return case_file, sitting(settings, case_file)


def is_paper_court(court: Court) -> bool:
    """The paper's court: 17 jurors, up to 3 rounds, the round summary unverified, the configured model."""
    return court.jurors == JURY_SIZE and court.rounds == PAPER_ROUNDS and not court.verifier and court.model is None
