"""Seal, amend and redact pre-registered plans: the operations behind `capsule prereg`.

A plan is sealed as one ledger entry per file: first each companion (the plan directory's
`rationale.md` and every scorer-sanity `compliant` file the plan names) that is not yet recorded,
then the plan itself, whose entry lists its companions' hashes under `companions`. A companion that
several plans share is recorded once. Changing a sealed plan means a new plan file that names the
old one (`amends`, `amend_reason`), sealed with an `amend` entry; the old entry stays. A redaction
is a same-length byte substitution recorded with the hash sealed before it, the hash after, the
offsets and the byte counts, so anyone holding the original bytes can confirm it.

Why the same length: it lets one list of offsets place the token in the original and the
replacement in the current file, with no field for a second list. The case it protects is an edit
smuggled in beside a redaction (a redact entry whose recorded hash is of a file changed elsewhere
too): `confirm_redaction` reads the one token and the one replacement at those offsets, rebuilds the
current file from the original and refuses any other difference, and a reader without the original
still sees, from the entry alone, which byte spans were redacted and that the length is the sealed
one (`file_bytes`). Shown by tests/unit/test_prereg_cli.py::test_an_edit_beside_a_redaction_is_refused.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from capsule.atomic import write_bytes_atomic
from capsule.errors import BadInputError, VerificationError
from capsule.hashing import sha256_bytes, sha256_file
from capsule.jsonio import read_input_text
from capsule.prereg.chain import symlink_on_path
from capsule.prereg.control_kinds import control_kind
from capsule.prereg.ledger import DEFAULT_LEDGER, Ledger
from capsule.prereg.ledger_entries import AmendEntry, Entry, RedactEntry, SealEntry
from capsule.prereg.loader import load_plan, parse_plan, plan_file
from capsule.prereg.plan import Plan

RATIONALE = "rationale.md"


def companions(plan: Plan) -> list[Path]:
    """The files sealed with a plan: its directory's rationale.md and its compliant-answer files."""
    directory = Path(plan.path).parent
    rationale = directory / RATIONALE
    if not rationale.is_file() or not read_input_text(rationale, "rationale").strip():
        raise BadInputError(f"{rationale}: missing or empty; a plan is sealed with its rationale")
    files = [rationale] + [
        directory / c.compliant for c in plan.controls if control_kind(c.kind).takes("compliant")
    ]
    return sorted(dict.fromkeys(files))


def _check_plain(ledger: Ledger, files: list[Path]) -> None:
    """Every file to seal is a plain file reached through no symlink: the chain re-hashes a sealed
    file where the ledger says it is and refuses a link there, so sealing one would leave a plan
    that no command accepts (BadInputError, before anything is appended)."""
    for file in files:
        relative = ledger.relative(file)
        link = symlink_on_path(ledger.root, relative)
        if link is not None:
            raise BadInputError(
                f"{relative}: reached through the symlink {link}; a sealed file must be a plain file "
                "(copy the target in place of the link, then seal)"
            )
        if not (ledger.root / relative).is_file():
            raise BadInputError(f"{relative}: not a plain file; a sealed file must be one")


def _record_companions(
    ledger: Ledger, plan: Plan, note: str, amending: bool
) -> tuple[dict[str, str], list[Entry]]:
    """The companions' digests, and the entries that record those not yet recorded as they are."""
    recorded: dict[str, str] = {}
    pending: list[Entry] = []
    plan_rel = ledger.relative(Path(plan.path))
    for file in companions(plan):
        relative, digest = ledger.relative(file), sha256_file(file)
        latest = ledger.latest_for(relative)
        if latest is None:
            pending.append(SealEntry(path=relative, sha256=digest, note=f"companion of {plan_rel}: {note}"))
        elif latest.sha256 != digest:
            if not amending:
                raise BadInputError(
                    f"{relative}: sealed at seq {latest.seq} with other bytes; a sealed file "
                    "changes only through `capsule prereg amend`"
                )
            pending.append(AmendEntry(
                path=relative, sha256=digest, note=f"companion of {plan_rel}: {note}", of=relative,
                of_sha256=latest.sha256,
            ))
        recorded[relative] = digest
    return recorded, pending


def _unchanged(ledger: Ledger, relative: str, digest: str, plan: Plan) -> bool:
    """True if the plan is already recorded with these bytes and unchanged companions (idempotent)."""
    latest = ledger.latest_for(relative)
    if latest is None:
        return False
    if latest.sha256 != digest:
        raise BadInputError(
            f"{relative}: sealed at seq {latest.seq} with other bytes (it was edited after "
            "sealing); restore it, or copy it to a new file and seal that with `amend`"
        )
    for file in companions(plan):
        companion = ledger.latest_for(ledger.relative(file))
        if companion is None or companion.sha256 != sha256_file(file):
            raise BadInputError(
                f"{file}: changed since {relative} was sealed; restore it or seal an amendment"
            )
    return True


def seal_plan(path: Path, note: str, ledger_path: Path = DEFAULT_LEDGER) -> list[Entry]:
    """Validate the plan, verify the ledger, and append its seal entries (none if already sealed as
    is): the companions' and the plan's entries in one write, decided and written under the ledger's
    lock, so a seal is all or nothing and two seals at once are one seal and one no-op."""
    plan = load_plan(path)
    if plan.amends:
        raise BadInputError(f"{plan.path}: amends {plan.amends}; seal it with `capsule prereg amend`")
    if not note.strip():
        raise BadInputError("--note must say what is being sealed and why")
    loaded = Ledger.load(ledger_path)
    with loaded.locked():
        ledger = loaded.current()
        ledger.verify()
        _check_plain(ledger, [Path(plan.path), *companions(plan)])
        relative, digest = ledger.relative(Path(plan.path)), sha256_file(Path(plan.path))
        if _unchanged(ledger, relative, digest, plan):
            return []
        recorded, pending = _record_companions(ledger, plan, note, amending=False)
        return ledger.append_all(
            [*pending, SealEntry(path=relative, sha256=digest, note=note, companions=recorded)]
        )


def amend_plan(
    new_path: Path, old_path: Path, reason: str, ledger_path: Path = DEFAULT_LEDGER
) -> list[Entry]:
    """Seal `new_path` as an amendment of the sealed plan `old_path`; the new file must name the old
    one (`amends`) and give the same reason (`amend_reason`). All or nothing, under the ledger's
    lock, as `seal_plan`."""
    plan = load_plan(new_path)
    loaded = Ledger.load(ledger_path)
    with loaded.locked():
        ledger = loaded.current()
        ledger.verify()
        return _amend_locked(ledger, plan, old_path, reason)


def _amend_locked(ledger: Ledger, plan: Plan, old_path: Path, reason: str) -> list[Entry]:
    new_rel, old_file = ledger.relative(Path(plan.path)), plan_file(Path(old_path))
    old_rel = ledger.relative(old_file)
    if new_rel == old_rel:
        raise BadInputError(
            f"{new_rel}: an amendment is a new file: copy the plan, edit the copy, set amends"
        )
    if plan.amends != old_rel:
        raise BadInputError(f"{new_rel}: amends = {plan.amends!r} but --of is {old_rel!r}; they must agree")
    if plan.amend_reason.strip() != reason.strip():
        raise BadInputError(f"{new_rel}: amend_reason in the file and --reason differ; make them the same")
    old = ledger.latest_for(old_rel)
    if old is None or not ledger.is_plan(old_rel):
        raise BadInputError(f"{old_rel}: not a sealed plan; there is nothing to amend (use `seal`)")
    if not old_file.is_file() or sha256_file(old_file) != old.sha256:
        raise VerificationError(f"{old_rel}: its bytes no longer match seq {old.seq}; restore it first")
    newer = ledger.superseded_by(old_rel)
    if newer is not None and newer.path != new_rel:
        raise BadInputError(f"{old_rel}: already amended by {newer.path} (seq {newer.seq}); amend that")
    _check_plain(ledger, [Path(plan.path), *companions(plan)])
    digest = sha256_file(Path(plan.path))
    if _unchanged(ledger, new_rel, digest, plan):
        return []
    recorded, pending = _record_companions(ledger, plan, reason, amending=True)
    amend = AmendEntry(path=new_rel, sha256=digest, note=reason, of=old_rel, of_sha256=old.sha256,
                       companions=recorded)
    return ledger.append_all([*pending, amend])


def _offsets(data: bytes, token: bytes) -> list[int]:
    found, start = [], 0
    while (index := data.find(token, start)) != -1:
        found.append(index)
        start = index + len(token)
    return found


def _neutral(plan: Plan) -> Plan:
    """The plan with free text blanked: what a redaction of a plan file may not change is the rest."""
    return replace(
        plan,
        description="",
        amend_reason="",
        claim=replace(plan.claim, text="", source=""),
        arms=tuple(replace(a, description="") for a in plan.arms),
        controls=tuple(replace(c, description="") for c in plan.controls),
        comparisons=tuple(replace(c, description="") for c in plan.comparisons),
    )


def _is_control_input(ledger: Ledger, relative: str) -> bool:
    named = any(
        isinstance(e, (SealEntry, AmendEntry)) and relative in (e.companions or {}) for e in ledger.entries
    )
    return named and not relative.endswith("/" + RATIONALE)


def redact_file(
    path: Path, token: str, replacement: str, reason: str, ledger_path: Path = DEFAULT_LEDGER
) -> Entry:
    """Replace every occurrence of `token` in a sealed file with same-length `replacement` and record it."""
    old_b, new_b = token.encode("utf-8"), replacement.encode("utf-8")
    if not old_b or len(old_b) != len(new_b) or old_b == new_b:
        raise BadInputError(
            f"--token and --with must differ and have the same length in UTF-8 bytes "
            f"({len(old_b)} vs {len(new_b)})"
        )
    if not reason.strip():
        raise BadInputError("--reason must say why the bytes are redacted")
    ledger = Ledger.load(ledger_path)
    relative, data = ledger.relative(Path(path)), Path(path).read_bytes()
    redacted, offsets = data.replace(old_b, new_b), _offsets(data, old_b)
    latest = ledger.latest_for(relative)
    if (
        isinstance(latest, RedactEntry)
        and sha256_bytes(data) == latest.sealed_sha256
        and sha256_bytes(redacted) == latest.sha256
        and offsets == latest.offsets
    ):
        write_bytes_atomic(Path(path), redacted)  # finish a redaction recorded but interrupted before writing
        ledger.verify()
        return latest
    ledger.verify()
    if latest is None:
        raise BadInputError(f"{relative}: not in the ledger; an unsealed file needs no recorded redaction")
    if _is_control_input(ledger, relative):
        raise BadInputError(f"{relative}: a control input; changing it changes results, so seal an amendment")
    if not offsets:
        raise BadInputError(f"{relative}: the token does not occur")
    if old_b in redacted:
        raise BadInputError(
            f"{relative}: the token still occurs after substitution (overlapping); use a longer one"
        )
    if ledger.is_plan(relative):
        before = parse_plan(data.decode("utf-8"), Path(path))
        after = parse_plan(redacted.decode("utf-8"), Path(path))
        if _neutral(before) != _neutral(after):
            raise BadInputError(
                f"{relative}: the redaction changes a setting, not just free text; seal an amendment"
            )
    entry = ledger.append(RedactEntry(
        path=relative,
        sha256=sha256_bytes(redacted),
        note=reason,
        sealed_sha256=latest.sha256,
        offsets=offsets,
        occurrences=len(offsets),
        token_bytes=len(old_b),
        file_bytes=len(data),
    ))
    write_bytes_atomic(Path(path), redacted)
    return entry


def confirm_redaction(entry: RedactEntry, original: bytes, current: bytes) -> None:
    """Confirm a redact entry from the original bytes: they hash to the sealed hash, the current bytes to
    the recorded hash, and they differ only at the recorded offsets, by one token and one replacement."""
    size, offsets = entry.token_bytes, entry.offsets
    if sha256_bytes(original) != entry.sealed_sha256:
        raise VerificationError(f"seq {entry.seq}: the original bytes do not hash to the sealed sha256")
    if sha256_bytes(current) != entry.sha256:
        raise VerificationError(f"seq {entry.seq}: the current bytes do not hash to the recorded sha256")
    if (
        len(original) != entry.file_bytes
        or len(current) != len(original)
        or len(offsets) != entry.occurrences
    ):
        raise VerificationError(f"seq {entry.seq}: byte counts differ from the record")
    tokens = {original[o : o + size] for o in offsets}
    replacements = {current[o : o + size] for o in offsets}
    if len(tokens) != 1 or len(replacements) != 1:
        raise VerificationError(
            f"seq {entry.seq}: the recorded offsets do not hold one token and one replacement"
        )
    rebuilt = original.replace(tokens.pop(), replacements.pop())
    if rebuilt != current:
        raise VerificationError(
            f"seq {entry.seq}: the substitution does not turn the original into the current file"
        )
