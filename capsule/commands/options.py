"""The click options several commands share, each declared once: `--ledger`, `--plan`, `--results`,
and `--endpoint` with `--endpoint-key-env`.

A command passes its own help text (what the option means to it); the flag, its parameter name, its
type and its default are the same everywhere. The default plan is `capsule.prereg.default_plan`'s.

Server arms (`backend = "server"`) launch a vLLM server unless an endpoint is given; the key is read
from the named environment variable when the arm starts and is never written anywhere.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from capsule.errors import BadInputError
from capsule.generation.backends import ENDPOINT_KEY_ENV
from capsule.prereg.default_plan import default_plan
from capsule.prereg.ledger import DEFAULT_LEDGER
from capsule.run_dir import RESULTS_ROOT

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

LEDGER_HELP = "The hash-chain ledger plans are sealed in; entry paths are relative to its grandparent."


class LedgerFile(click.Path):
    """A ledger file's path: it need not exist (an absent ledger is an empty one), but a directory, a
    FIFO or device (a FIFO would block, /dev/zero never ends, /dev/null reads as an empty ledger) and
    a path that cannot be looked at (a loop of links, a name too long) are refused before the
    command starts, in one `Error:` line (exit 2) that every command shares."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The path, or BadInputError when it names anything but a regular file or nothing."""
        flag = param.opts[0] if param is not None else "--ledger"
        try:
            mode: int | None = os.stat(value).st_mode
        except (FileNotFoundError, NotADirectoryError):
            mode = None
        except OSError as error:
            raise BadInputError(
                f"ledger {value}: cannot be looked at ({error.strerror or error}); "
                f"give {flag} the path of ledger.jsonl"
            ) from None
        if mode is not None and stat.S_ISDIR(mode):
            raise BadInputError(
                f"ledger {value} is not a file (a directory); give {flag} the path of ledger.jsonl"
            )
        if mode is not None and not stat.S_ISREG(mode):
            raise BadInputError(
                f"ledger {value} is not a regular file (a FIFO, a device or a socket); "
                f"give {flag} the path of ledger.jsonl"
            )
        return super().convert(value, param, ctx)


def ledger_option(
    help: str = LEDGER_HELP, *, flag: str = "--ledger", name: str = "ledger_path", required: bool = False,
    optional: bool = False,
) -> Decorator:
    """A ledger file option (default `prereg/ledger.jsonl`; `required`: no default, it must be given;
    `optional`: no default, None when not given). `capsule import` names two ledgers: its `--ledger`
    is the other machine's (for a run directory only), `--into` this one."""
    return click.option(
        flag,
        name,
        type=LedgerFile(),
        default=None if required or optional else DEFAULT_LEDGER,
        required=required,
        show_default=not (required or optional),
        help=help,
    )


def pinned_keys_option(help: str) -> Decorator:
    """`--key PEM`, repeatable (parameter `keys`): public keys pinned on the command line, each
    accepted for the run it signed whether or not the run's plan trusts it (as `verify --key`)."""
    return click.option(
        "--key",
        "keys",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help=help,
    )


def plan_option(help: str, *, embedded_default: bool = False) -> Decorator:
    """`--plan DIR` (a plan directory or its plan.toml), parameter `plan_path`; with
    `embedded_default` it defaults to the embedded default plan, else to none."""
    return click.option(
        "--plan",
        "plan_path",
        type=click.Path(path_type=Path),
        default=default_plan() if embedded_default else None,
        show_default=embedded_default,
        help=help,
    )


def results_option(help: str, *, default: Path | None = RESULTS_ROOT) -> Decorator:
    """`--results DIR`, where runs are written (parameter `results_root`); `default=None` leaves the
    choice to the command (reproduce's depends on --dry-run and --rehearse)."""
    return click.option(
        "--results",
        "results_root",
        type=click.Path(path_type=Path),
        default=default,
        show_default=default is not None,
        help=help,
    )


class EndpointURL(click.ParamType[Any, Any]):
    """`--endpoint`'s URL, checked (`server_endpoint.base_url`: http or https, a host, a valid port)
    when the options are parsed, so a malformed one is refused before any run directory opens."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The URL as given, or BadInputError naming what is wrong with it."""
        from capsule.generation.backends.server_endpoint import base_url

        base_url(str(value))
        return value


def endpoint_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add `--endpoint URL` and `--endpoint-key-env NAME` to a click command (parameters `endpoint`
    and `endpoint_key_env`), shared by `capsule generate` and `capsule reproduce`."""
    command = click.option(
        "--endpoint-key-env",
        default=ENDPOINT_KEY_ENV,
        show_default=True,
        help="Environment variable holding the endpoint's API key (read, never written).",
    )(command)
    return click.option(
        "--endpoint",
        type=EndpointURL(),
        default=None,
        metavar="URL",
        help="Server arms: send requests to this OpenAI-compatible endpoint (e.g. http://host:8000/v1) "
        "instead of launching a vLLM server; its hardware and batch settings are recorded as unknown.",
    )(command)
