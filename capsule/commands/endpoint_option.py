"""`--endpoint URL` and `--endpoint-key-env NAME`, shared by `capsule generate` and `capsule reproduce`.

Server arms (`backend = "server"`) launch a vLLM server unless an endpoint is given; the key is read
from the named environment variable when the arm starts and is never written anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from capsule.generation.backends import ENDPOINT_KEY_ENV


def endpoint_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the two options to a click command (parameters `endpoint` and `endpoint_key_env`)."""
    command = click.option(
        "--endpoint-key-env",
        default=ENDPOINT_KEY_ENV,
        show_default=True,
        help="Environment variable holding the endpoint's API key (read, never written).",
    )(command)
    return click.option(
        "--endpoint",
        default=None,
        metavar="URL",
        help="Server arms: send requests to this OpenAI-compatible endpoint (e.g. http://host:8000/v1) "
        "instead of launching a vLLM server; its hardware and batch settings are recorded as unknown.",
    )(command)
