"""The `capsule` command: a click group whose subcommands live in `capsule.commands.*`.

Subcommands are imported lazily (by name, on first use) so that `capsule --help` and light commands
never import torch or vLLM. Every `CapsuleError` becomes one `Error: ...` line and its exit code, and
so does every error of the standalone scorer (`ifeval_scorer.ScorerError`: exit 3 for a failed
verification of its data, 2 otherwise); `--debug` shows the traceback instead.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from capsule import __version__
from capsule.errors import CapsuleError, printable

# command name -> "module:attribute"; each module is small and imports heavy libraries inside functions.
COMMANDS: dict[str, str] = {
    "fetch": "capsule.commands.fetch:fetch",
    "reproduce": "capsule.commands.reproduce:reproduce",
    "score": "capsule.commands.score:score",
    "manifest": "capsule.commands.manifest:manifest",
    "keygen": "capsule.commands.keygen:keygen",
    "verify": "capsule.commands.verify:verify",
    "generate": "capsule.commands.generate:generate",
    "prereg": "capsule.commands.prereg:prereg",
    "plan": "capsule.commands.plan:plan",
    "doctor": "capsule.commands.doctor:doctor",
    "report": "capsule.commands.report:report",
    "check-numbers": "capsule.commands.check_numbers:check_numbers",
    "compare": "capsule.commands.compare:compare",
    "import": "capsule.commands.import_run:import_run",
    "export": "capsule.commands.export_run:export_run",
    "import-samples": "capsule.commands.import_samples:import_samples",
}


def exit_code_for(error: Exception) -> int | None:
    """The exit code of an error the user can act on (a capsule or scorer error), None for any other.

    The scorer is looked at only once it is loaded (an error of its can come from nowhere else), so
    light commands never import it.
    """
    if isinstance(error, CapsuleError):
        return error.exit_code
    if "ifeval_scorer.errors" in sys.modules:
        from ifeval_scorer.errors import ScorerError, ScorerVerificationError

        if isinstance(error, ScorerVerificationError):
            return 3
        if isinstance(error, ScorerError):
            return 2
    return None


class CapsuleGroup(click.Group):
    """A click group that loads subcommands on demand and turns the user's errors into exit codes."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as error:
            code = exit_code_for(error)
            if code is None or (ctx.obj and ctx.obj.get("debug")):
                raise
            click.echo(f"Error: {printable(str(error))}", err=True)
            ctx.exit(code)
        except KeyboardInterrupt:
            click.echo(
                "Interrupted: completed work is on disk; run the same command again to resume.", err=True
            )
            ctx.exit(130)


@click.group(cls=CapsuleGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the full traceback on errors.")
@click.version_option(__version__, prog_name="capsule")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Check a model card's IFEval claim: sealed plans, controls, and signed, verifiable results."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def main() -> None:
    """Console-script entry point."""
    cli.main(prog_name="capsule")


if __name__ == "__main__":  # pragma: no cover
    main()
