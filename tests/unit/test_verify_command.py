"""The `verify:` line `capsule reproduce` ends with: a command that verifies the run just signed, with
`--key` when its plan does not trust the signing key (an ephemeral key on a first `make reproduce`)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from run_pair import PLAN, SIGNER, dry_run, new_root, sign

from capsule.cli import cli
from capsule.evidence.signing import SigningKey, fingerprint_of, generate_signer
from capsule.pipeline.reproduce import verify_command
from capsule.prereg.ledger import Ledger
from capsule.run_dir import RunDir


@pytest.mark.parametrize("trusted", [True, False])
def test_the_printed_verify_command_verifies_the_run(tmp_path: Path, trusted: bool) -> None:
    root = new_root(tmp_path / "repo")
    run = dry_run(root)
    key: SigningKey = SIGNER if trusted else generate_signer()
    ledger_path = root / "prereg" / "ledger.jsonl"
    sign(run, ledger_path, key)  # recorded by a bundle entry, as a real run's end does
    plan = f"{PLAN}/plan.toml"
    command = verify_command(RunDir(run), Ledger.load(ledger_path), plan, fingerprint_of(key.public_key),
                             (root / plan).read_bytes())
    assert ("--key" in command) is not trusted
    words = shlex.split(command, comments=True)
    assert words[:3] == ["capsule", "verify", str(run)]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        result = CliRunner().invoke(cli, words[1:])
        plain = CliRunner().invoke(cli, ["verify", str(run)])
    assert result.exit_code == 0, result.output + result.stderr
    assert plain.exit_code == (0 if trusted else 3)
