"""The layout of a run directory: the one place that spells a run's file names.

A sealed run is `results/<plan>/<run_id>/`, a dry run `runs/dry-run/<plan>/<run_id>/`, a rehearsal
(`reproduce --rehearse`) `runs/rehearsal/<plan>/<run_id>/`, a probe (`reproduce --probe K`)
`runs/probe/<plan>/<run_id>/`, and an
ad-hoc run (`capsule generate` without a plan) `runs/adhoc/<run_id>/`, an import of another
harness's samples (`capsule import-samples`) `runs/imports/<name>/`. Every stage (generate,
score, analyse, report, sign), the verifier and the report read and write a run only through a
`RunDir`, so a file name is written once. Paths are relative-posix where they are recorded (the
bundle lists `generations/a.jsonl`), absolute where they are opened.

    run.json                     the run's identity, fixed at its start (pipeline.opening)
    plan.toml, plan.seal.json    the sealed plan and its ledger entry, copied at the start
    adhoc.json                   instead, for an ad-hoc run: its arm table and keys (prereg.adhoc)
    import.json                  instead, for an import: the files, disagreements, band, comparison
    manifest.json                the machine fingerprint (machine.manifest)
    rehearsal.json               a rehearsal only: its stand-in models and shrinking (pipeline.rehearsal)
    probe.json                   a probe only: batch timings, loads, the study's cost (pipeline.probe_run)
    generations/<arm>.jsonl      generation rows, and <arm>.meta.json beside them
    generations/<arm>.refused.json  instead, an arm its backend refused at load (the engine's message)
    generations/<arm>.refused.log   its evidence: the engine's start-up log or exception chain
    scores/<arm>.jsonl           seeded score rows, and <arm>.meta.json beside them
    scores/stability/<c>.jsonl   unseeded scorer runs of a scorer_stability control
    servers/<arm>.command.json   a launched OpenAI-compatible server: command line, version, port
    servers/<arm>.log            its output; servers/<arm>.pid.json while it runs (pid, process group)
    analysis.json                the sealed rules applied (analysis.schema)
    RESULTS.md, plots/<n>.png    the report
    bundle.json, bundle.dsse.json  the digest of every file above and its signature
    bundle.pub.pem               the signing key's public half, so a bundle verifies offline

Beside a run directory, `.<run_id>.resign-undo/` exists only while `capsule report --resign` rewrites
the run: the files it replaces (pipeline.resign_journal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from capsule.errors import BadInputError

RESULTS_ROOT = Path("results")  # sealed runs: RESULTS_ROOT/<plan>/<run_id>/
DRY_RUN_ROOT = Path("runs/dry-run")  # dry runs (fake backend): DRY_RUN_ROOT/<plan>/<run_id>/
REHEARSAL_ROOT = Path("runs/rehearsal")  # rehearsals (stand-in model): REHEARSAL_ROOT/<plan>/<run_id>/
PROBE_ROOT = Path("runs/probe")  # probes (every arm on K prompts): PROBE_ROOT/<plan>/<run_id>/
ADHOC_ROOT = Path("runs/adhoc")  # ad-hoc runs (no plan): ADHOC_ROOT/<run_id>/
IMPORTS_ROOT = Path("runs/imports")  # other harnesses' samples, imported: IMPORTS_ROOT/<name>/
RUN_RECORD = "run.json"
PLAN_COPY = "plan.toml"
PLAN_SEAL = "plan.seal.json"
ADHOC_RECORD = "adhoc.json"
IMPORT_RECORD = "import.json"
MANIFEST = "manifest.json"
NODES = "nodes"  # nodes/<digest>.json: the manifest of each other Ray node a lane ran on
REHEARSAL_RECORD = "rehearsal.json"
PROBE_RECORD = "probe.json"
GENERATIONS = "generations"
SCORES = "scores"
STABILITY = "stability"
ANALYSIS = "analysis.json"
RESULTS = "RESULTS.md"
PLOTS = "plots"
BUNDLE = "bundle.json"
ENVELOPE = "bundle.dsse.json"
PUBLIC_KEY = "bundle.pub.pem"
SERVERS = "servers"
RESIGN_JOURNAL_SUFFIX = ".resign-undo"
SERVER_COMMAND_SUFFIX = ".command.json"
SERVER_LOG_SUFFIX = ".log"
SERVER_PID_SUFFIX = ".pid.json"
ROWS_SUFFIX = ".jsonl"
META_SUFFIX = ".meta.json"
REFUSED_SUFFIX = ".refused.json"
REFUSED_LOG_SUFFIX = ".refused.log"

#: The one rule for names that become file or directory names (plans, arms, controls, subsets,
#: comparisons, `capsule generate --name`): a lowercase letter or digit first, then up to 63 of
#: `[a-z0-9_.-]`. No separator, no leading dot, so a name can never leave the directory it is
#: joined to (`../x`, `/abs`, `.hidden` are refused). Matched whole (`fullmatch`): `$` alone would
#: let a trailing newline through (`x\n`).
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")

#: A file of a model directory that a plan pins (`[model.files]`): one plain file name, as the hub
#: and `capsule plan new` name them (letters, digits, `_.+-`, no leading dot; no separator, so no
#: `..` and no absolute path; at most 255 characters).
MODEL_FILE_RE = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]{0,254}")


def name_problem(value: object) -> str | None:
    """Why `value` cannot name a file of a run (None when it can): the text of an error message."""
    if isinstance(value, str) and NAME_RE.fullmatch(value):
        return None
    return f"{value!r} must match {NAME_RE.pattern} (it names files)"


def model_file_problem(value: object) -> str | None:
    """Why `value` cannot be a pinned model file's name (None when it can): a path (`/any/file`,
    `../../x`, `a/b`), a hidden or odd name; a plan's `[model.files]` keys are joined to the model's
    directory, so each must name a file in it and nothing else."""
    if isinstance(value, str) and MODEL_FILE_RE.fullmatch(value):
        return None
    return f"{value!r} is not a plain file name of the model directory (must match {MODEL_FILE_RE.pattern})"


#: A hub repository id, `org/name`: each part starts with a letter or digit and holds letters,
#: digits and `_.-` (at most 96 characters, the hub's own bound), never `..` or `--` (the hub refuses
#: both, and `..` would climb out of the cache directory the id names).
HUB_REPO_RE = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")


def hub_repo_problem(value: object) -> str | None:
    """Why `value` cannot be a hub repository id (None when it can): not `org/name` by `HUB_REPO_RE`,
    or holding `..` or `--`."""
    if isinstance(value, str) and HUB_REPO_RE.fullmatch(value) and ".." not in value and "--" not in value:
        return None
    return f"{value!r} is not a hub repository id (org/name: letters, digits and _.-, no '..' or '--')"


def safe_name(value: str, what: str) -> str:
    """`value` if it obeys `NAME_RE`, else BadInputError naming `what` (e.g. "arm name")."""
    problem = name_problem(value)
    if problem is not None:
        raise BadInputError(f"{what} {problem}")
    return value


@dataclass(frozen=True)
class RunDir:
    """Every path of one run directory, derived from its root; a name joined into a path (an arm's,
    a control's) is checked against `NAME_RE` first, so no caller can reach outside the run."""

    path: Path

    @property
    def record(self) -> Path:
        """run.json: the run's identity (plan hash, ledger head at start, start time)."""
        return self.path / RUN_RECORD

    @property
    def plan(self) -> Path:
        """The copy of the sealed plan the run was made from."""
        return self.path / PLAN_COPY

    @property
    def plan_seal(self) -> Path:
        """The plan's ledger entry, copied when the run started."""
        return self.path / PLAN_SEAL

    @property
    def adhoc(self) -> Path:
        """An ad-hoc run's arm table, prompt file sha256 and keys (its run.json's plan_sha256)."""
        return self.path / ADHOC_RECORD

    @property
    def import_record(self) -> Path:
        """An import's record: the harness files, the disagreements, the band, the paired comparison."""
        return self.path / IMPORT_RECORD

    @property
    def manifest(self) -> Path:
        """The machine fingerprint written when the run started."""
        return self.path / MANIFEST

    def node_manifest(self, digest: str) -> Path:
        """The manifest of another Ray node the run's lanes ran on, named by its digest."""
        return self.path / NODES / f"{digest}.json"

    @property
    def rehearsal(self) -> Path:
        """A rehearsal's record: its stand-in models and what it shrank (absent from other runs)."""
        return self.path / REHEARSAL_RECORD

    @property
    def probe(self) -> Path:
        """A probe's record: what it measured and the full study's cost from it (absent elsewhere)."""
        return self.path / PROBE_RECORD

    @property
    def generations_dir(self) -> Path:
        """The folder of every arm's generation rows."""
        return self.path / GENERATIONS

    def generations(self, arm: str) -> Path:
        """An arm's generation rows (appended batch by batch)."""
        return self.generations_dir / f"{safe_name(arm, 'arm name')}{ROWS_SUFFIX}"

    def generations_meta(self, arm: str) -> Path:
        """An arm's generation sidecar: settings, plan hash, manifest digest, status."""
        return self.generations_dir / f"{safe_name(arm, 'arm name')}{META_SUFFIX}"

    def refusal(self, arm: str) -> Path:
        """An arm its backend refused at load time: the engine's message, the settings, when."""
        return self.generations_dir / f"{safe_name(arm, 'arm name')}{REFUSED_SUFFIX}"

    def refusal_log(self, arm: str) -> Path:
        """A refused arm's evidence: the engine's start-up log, or the exception chain it raised."""
        return self.generations_dir / f"{safe_name(arm, 'arm name')}{REFUSED_LOG_SUFFIX}"

    def scores(self, arm: str) -> Path:
        """An arm's seeded score rows."""
        return self.path / SCORES / f"{safe_name(arm, 'arm name')}{ROWS_SUFFIX}"

    def scores_meta(self, arm: str) -> Path:
        """What an arm's scores were made from (generations sha256, scorer seed)."""
        return self.path / SCORES / f"{safe_name(arm, 'arm name')}{META_SUFFIX}"

    def stability(self, control: str) -> Path:
        """The stored unseeded scorer runs of a scorer_stability control."""
        return self.path / SCORES / STABILITY / f"{safe_name(control, 'control name')}{ROWS_SUFFIX}"

    @property
    def servers_dir(self) -> Path:
        """The folder of the servers the `server` backend launched for this run."""
        return self.path / SERVERS

    def server_command(self, name: str) -> Path:
        """A launched server's command line, version and port (never its API key)."""
        return self.servers_dir / f"{name}{SERVER_COMMAND_SUFFIX}"

    def server_log(self, name: str) -> Path:
        """A launched server's stdout and stderr."""
        return self.servers_dir / f"{name}{SERVER_LOG_SUFFIX}"

    def server_pid(self, name: str) -> Path:
        """A running server's pid and process group; removed when it is stopped, so one left behind
        names a server whose capsule was killed (the next run stops it)."""
        return self.servers_dir / f"{name}{SERVER_PID_SUFFIX}"

    def server_pid_files(self) -> list[Path]:
        """Every pid record left in the run (servers that may still be running)."""
        return sorted(self.servers_dir.glob(f"*{SERVER_PID_SUFFIX}")) if self.servers_dir.is_dir() else []

    @property
    def analysis(self) -> Path:
        """analysis.json: the sealed comparisons, controls and verdicts applied."""
        return self.path / ANALYSIS

    @property
    def results(self) -> Path:
        """RESULTS.md: the report."""
        return self.path / RESULTS

    @property
    def plots_dir(self) -> Path:
        """The folder of the report's plots."""
        return self.path / PLOTS

    def plot(self, name: str) -> Path:
        """One plot file, `name` being e.g. `arms.png`."""
        return self.plots_dir / name

    @staticmethod
    def plot_relative(name: str) -> str:
        """A plot's path as RESULTS.md and the bundle name it (`plots/arms.png`)."""
        return f"{PLOTS}/{name}"

    @property
    def bundle(self) -> Path:
        """bundle.json: every file of the run with its sha256."""
        return self.path / BUNDLE

    @property
    def envelope(self) -> Path:
        """bundle.dsse.json: the DSSE signature over the bundle's statement."""
        return self.path / ENVELOPE

    @property
    def public_key(self) -> Path:
        """bundle.pub.pem: the public key the bundle was signed with."""
        return self.path / PUBLIC_KEY

    @property
    def resign_journal(self) -> Path:
        """The undo journal of a re-sign in progress, beside the run directory (never bundled)."""
        return self.path.parent / f".{self.path.name}{RESIGN_JOURNAL_SUFFIX}"

    @property
    def is_bundled(self) -> bool:
        """Whether the run has been signed (a signed run is finished)."""
        return self.bundle.exists()
