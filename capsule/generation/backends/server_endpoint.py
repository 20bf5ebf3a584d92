"""Connecting to an OpenAI-compatible endpoint: its base URL, key, model id, and what it reports.

`connect` checks, before any prompt is sent, that the endpoint answers, accepts the key and serves
the model id the arm will ask for; each failure is one `UnavailableError` naming the endpoint and
the fix. What the endpoint reports (`/v1/models`, vLLM's `/version`) is kept for the arm's record.
The key is read from an environment variable and lives only in the request headers.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from capsule.errors import BadInputError, UnavailableError
from capsule.prereg.backend_specs import endpoint_options
from capsule.prereg.plan import Arm


@dataclass(frozen=True)
class Endpoint:
    """An endpoint the arm talks to: base URL (ending in /v1), model id, headers, what it reported."""

    base_url: str
    model_id: str
    headers: dict[str, str] = field(repr=False)  # holds the key: never recorded
    reported: dict[str, Any]
    key_env: str | None  # the variable the key came from (None: a launched server's own key)


def endpoint_arm(arm: Arm) -> Arm:
    """A server arm as it runs against a given endpoint, and so as it is recorded: its client options
    only, no env (the engine options and env configure a server the capsule launches; an endpoint's
    server was started by someone else, with settings the capsule cannot know)."""
    return dataclasses.replace(arm, backend_options=endpoint_options(arm.backend_options), env={})


def base_url(url: str) -> str:
    """The endpoint's /v1 base: `http://h:8000`, `http://h:8000/` and `http://h:8000/v1` all give
    `http://h:8000/v1`. Anything but an http(s) URL with a host and a valid port (`file:///etc/passwd`,
    `http://[::1`, `http://h:99999`) is bad input: what `--endpoint` is checked with before a run opens."""
    url = url.rstrip("/")
    fix = "give an http:// or https:// URL, e.g. http://127.0.0.1:8000/v1"
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError as error:
        raise BadInputError(f"--endpoint {url!r}: not a URL ({error}); {fix}") from None
    if parts.scheme not in ("http", "https") or not url.startswith(("http://", "https://")):
        raise BadInputError(f"--endpoint {url!r}: {fix}")
    host = parts.netloc.rpartition("@")[2]
    after_ipv6 = host.partition("]")[2] if host.startswith("[") else ""
    if after_ipv6 and not (after_ipv6[0] == ":" and after_ipv6[1:].isdigit()):
        port_ok = False  # `http://[::1]x`: urlsplit reads no port and no error
    if not parts.hostname or not port_ok or any(c.isspace() or ord(c) < 32 for c in url):
        raise BadInputError(f"--endpoint {url!r}: no host, a bad port or a blank in it; {fix}")
    return url if url.endswith("/v1") else url + "/v1"


def connect(
    client: Any, url: str, key_env: str | None, model_id: object, key: str | None = None
) -> Endpoint:
    """Check the endpoint answers `/models` with this key and serves `model_id` (None: its only
    model); read its version. The key is `key`, else `$key_env` (unset: no Authorization header)."""
    import httpx

    base = base_url(url)
    if key is None and key_env:
        key = os.environ.get(key_env) or None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        response = client.get(base + "/models", headers=headers, timeout=15.0)
    except httpx.TransportError as error:
        raise UnavailableError(
            f"{base}: endpoint unreachable ({type(error).__name__}: {error}); start the server or fix "
            "--endpoint (an OpenAI-compatible base URL such as http://127.0.0.1:8000/v1)"
        ) from error
    if response.status_code in (401, 403):
        where = f"${key_env}" if key_env else "the key"
        state = "is not set" if key_env and not os.environ.get(key_env) else "was refused"
        raise UnavailableError(
            f"{base}: HTTP {response.status_code}, the API key {state}; put the endpoint's key in {where}"
        )
    if response.status_code != 200:
        raise UnavailableError(
            f"{base}/models: HTTP {response.status_code}; is this an OpenAI-compatible endpoint? "
            "(--endpoint takes its base URL, e.g. http://127.0.0.1:8000/v1)"
        )
    try:
        models = [str(m["id"]) for m in response.json().get("data", [])]
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise UnavailableError(f"{base}/models: not an OpenAI model list ({error})") from error
    if model_id is None:
        if len(models) != 1:
            raise UnavailableError(
                f"{base} serves {models or 'no models'}; name the one to use in the arm's "
                "backend_options.model_id"
            )
        model_id = models[0]
    if model_id not in models:
        raise UnavailableError(
            f"{base} does not serve model id {model_id!r} (it serves {models}); set the arm's "
            "backend_options.model_id to one of them, or point --endpoint at the right server"
        )
    reported = {"models": models, "version": _version(client, base, headers)}
    return Endpoint(base, str(model_id), headers, reported, key_env)


def _version(client: Any, base: str, headers: dict[str, str]) -> str:
    """vLLM's `/version` ("unknown" where the endpoint has none)."""
    try:
        response = client.get(base.removesuffix("/v1") + "/version", headers=headers, timeout=5.0)
        if response.status_code == 200:
            return str(response.json().get("version", "unknown"))
    except Exception:  # noqa: BLE001 - the version is informative only
        pass
    return "unknown"
