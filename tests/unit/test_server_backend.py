"""The server backend against a fake in-process OpenAI-compatible endpoint: protocol, rows, retries,
errors, resume, and the seed probe (the real vLLM server: tests/integration/test_server.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from arm_builder import build_arm
from openai_fake import MODEL_ID, Faults, fake_openai

from capsule.errors import BadInputError, CapsuleError, UnavailableError
from capsule.generation.arm_runner import ArmResult, generate_arm
from capsule.generation.backends import BackendContext, load_backend
from capsule.generation.backends import server as server_module
from capsule.generation.backends.fake import FakeChatTokenizer
from capsule.generation.backends.server_endpoint import base_url
from capsule.generation.backends.server_launch import launch_command
from capsule.generation.batching import request_seed
from capsule.hashing import sha256_ids
from capsule.prereg.plan import Arm, Decoding
from ifeval_scorer import Prompt

PROMPTS = {2000 + i: Prompt(2000 + i, f"prompt number {i} " * (i % 3 + 1), ("x",), ({},)) for i in range(8)}
KEYS = list(PROMPTS)
SAMPLE = Decoding("sample", 1.0, 0.95, 20, 0.0, 1.5, 1.0)


@pytest.fixture(autouse=True)
def no_retry_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "_RETRY_PAUSE_S", (0.0,))


@pytest.fixture()
def model_dir(tmp_path: Path) -> Path:
    """What the server backend reads locally: stop ids and the architecture (no weights)."""
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "generation_config.json").write_text(json.dumps({"eos_token_id": 0}))
    (directory / "config.json").write_text(json.dumps({"architectures": ["FakeForCausalLM"]}))
    return directory


def server_arm(**options: Any) -> Arm:
    fields = {k: options.pop(k) for k in ("decoding", "seed", "batch_size", "name") if k in options}
    return build_arm(
        backend="server",
        backend_options={"concurrency": 3, "enforce_eager": True, "model_id": MODEL_ID, **options},
        **{"name": "srv", "batch_size": 2, "max_new_tokens": 10, **fields},
    )


def run(arm: Arm, out: Path, model_dir: Path, endpoint: str, keys: list[int] = KEYS) -> ArmResult:
    return generate_arm(
        arm,
        prompts=PROMPTS,
        keys=keys,
        model_dir=model_dir,
        out_dir=out,
        plan_hash="p" * 64,
        manifest_digest="m" * 64,
        progress=False,
        tokenizer=FakeChatTokenizer(),
        endpoint=endpoint,
    )


def rows(result: ArmResult) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.rows_path.read_text().splitlines()]


def test_completions_send_the_capsules_ids_and_rows_record_each_request(
    tmp_path: Path, model_dir: Path
) -> None:
    with fake_openai() as fake:
        result = run(server_arm(decoding=SAMPLE, seed=3), tmp_path / "run", model_dir, fake.url)
    assert result.complete and result.n_rows == len(KEYS)
    tokenizer = FakeChatTokenizer()
    generation = fake.bodies[2:]  # after the two identical probe requests
    assert fake.bodies[0] == fake.bodies[1]
    assert sorted(tuple(b["prompt"]) for b in generation) == sorted(
        tuple(tokenizer.render(PROMPTS[k].prompt, "off")) for k in KEYS
    )
    body = generation[0]
    assert body["stop_token_ids"] == [0] and body["return_token_ids"] and body["stream"]
    assert {body[k] for k in ("temperature", "top_p", "top_k", "presence_penalty")} == {1.0, 0.95, 20, 1.5}
    for row in rows(result):
        assert row["input_ids_sha256"] == sha256_ids(tokenizer.render(PROMPTS[row["key"]].prompt, "off"))
        request = row["request"]
        assert request["seed_sent"] == row["seed"] == request_seed(3, row["key"])
        assert request["sent_at"] <= request["first_token_at"] <= request["finished_at"]
        assert 0 <= request["in_flight_at_send"] < 3
        assert request["usage"]["completion_tokens"] == row["n_output_tokens"]
        assert request["attempts"] == 1 and request["finish_reason_reported"] == row["finish_reason"]
    meta = json.loads(result.meta_path.read_text())
    assert meta["backend"]["mode"] == "endpoint" and meta["backend"]["reported"]["version"] == "fake-0.1"
    assert meta["backend"]["server"]["hardware"].startswith("unknown")
    assert meta["backend"]["determinism_probe"]["identical"] is True


def test_arm_seeds_send_the_arm_seed_with_every_request(tmp_path: Path, model_dir: Path) -> None:
    with fake_openai() as fake:
        result = run(server_arm(decoding=SAMPLE, seed=42, request_seeds="arm"), tmp_path, model_dir, fake.url)
    assert {b["seed"] for b in fake.bodies} == {42}
    assert {r["seed"] for r in rows(result)} == {42}


def test_chat_api_sends_text_and_compares_the_servers_rendering(tmp_path: Path, model_dir: Path) -> None:
    with fake_openai() as fake:
        result = run(server_arm(api="chat"), tmp_path, model_dir, fake.url)
    assert all("messages" in b and "chat_template_kwargs" not in b for b in fake.bodies)
    got = rows(result)
    assert {r["request"]["server_prompt_matches"] for r in got} == {True}
    assert all(r["request"]["server_prompt_ids_sha256"] == r["input_ids_sha256"] for r in got)


def test_a_failed_request_is_retried_with_the_same_seed(tmp_path: Path, model_dir: Path) -> None:
    with fake_openai(Faults(fail_next=2, truncate_next=1, no_choices_next=1)) as fake:
        result = run(server_arm(max_attempts=6, concurrency=1), tmp_path, model_dir, fake.url)
    assert result.complete and len(rows(result)) == len(KEYS)
    assert sum(r["request"]["attempts"] - 1 for r in rows(result)) + 0 <= 4
    seeds_by_prompt: dict[tuple[int, ...], set[int]] = {}
    for body in fake.bodies:
        seeds_by_prompt.setdefault(tuple(body["prompt"]), set()).add(body["seed"])
    assert all(len(seeds) == 1 for seeds in seeds_by_prompt.values())


def test_bounded_failures_stop_the_arm_keep_whole_batches_and_resume(tmp_path: Path, model_dir: Path) -> None:
    arm = server_arm(concurrency=1, max_attempts=2)
    with fake_openai(Faults(fail_after=2 + 4)) as fake:  # the probe's 2 requests, then 4 rows
        with pytest.raises(UnavailableError, match=fake.url.replace(".", r"\.") + ".*failed 2 times"):
            run(arm, tmp_path, model_dir, fake.url)
    first = [json.loads(line) for line in (tmp_path / "generations" / "srv.jsonl").read_text().splitlines()]
    assert len(first) == 4 and all("response" in r for r in first)  # 2 whole batches, no failed row
    meta = json.loads((tmp_path / "generations" / "srv.meta.json").read_text())
    assert meta["status"] == "partial" and "failed" in meta["reason"]
    with fake_openai() as fake:
        result = run(arm, tmp_path, model_dir, fake.url)
    got = rows(result)
    assert result.complete and sorted(r["key"] for r in got) == sorted(KEYS)
    assert got[:4] == first and result.new_rows == len(KEYS) - 4


@pytest.mark.parametrize(
    ("faults", "model", "expected"),
    [
        (Faults(key="right"), MODEL_ID, r"key is not set; put the endpoint's key in \$CAPSULE_ENDPOINT_KEY"),
        (Faults(), "other-model", r"does not serve model id 'other-model' \(it serves \['fake-model'\]\)"),
        (Faults(no_token_ids=True), MODEL_ID, "no token_ids"),
        (Faults(no_choices_next=99), MODEL_ID, "held no choices"),
        (Faults(truncate_next=99), MODEL_ID, "truncated"),
        (Faults(non_object_next=99), MODEL_ID, "malformed event '5' \\(not a JSON object\\)"),
    ],
)
def test_endpoint_faults_are_one_error_naming_the_endpoint(
    tmp_path: Path, model_dir: Path, faults: Faults, model: str, expected: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.delenv("CAPSULE_ENDPOINT_KEY", raising=False)
    with fake_openai(faults) as fake:
        with pytest.raises(CapsuleError, match=expected) as caught:
            run(server_arm(model_id=model, max_attempts=2), tmp_path, model_dir, fake.url)
    assert fake.url in str(caught.value) and caught.value.exit_code == 2
    assert not (tmp_path / "generations" / "srv.jsonl").exists()


def test_the_key_comes_from_the_environment_and_is_never_written(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAPSULE_ENDPOINT_KEY", "sk-secret-123")
    with fake_openai(Faults(key="sk-secret-123")) as fake:
        result = run(server_arm(), tmp_path, model_dir, fake.url)
    assert result.complete
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert b"sk-secret-123" not in path.read_bytes(), path


def test_an_unreachable_endpoint_names_it_and_the_fix(tmp_path: Path, model_dir: Path) -> None:
    with fake_openai() as fake:
        url = fake.url
    with pytest.raises(UnavailableError, match=r"127\.0\.0\.1:\d+/v1: endpoint unreachable.*--endpoint"):
        run(server_arm(), tmp_path, model_dir, url)


def test_an_endpoint_that_ignores_the_seed_is_reported(tmp_path: Path, model_dir: Path) -> None:
    with fake_openai(Faults(ignore_seed=True)) as fake:
        with pytest.warns(UserWarning, match="ignores the seed"):
            result = run(server_arm(decoding=SAMPLE), tmp_path, model_dir, fake.url)
    meta = json.loads(result.meta_path.read_text())
    assert meta["backend"]["determinism_probe"]["identical"] is False


def test_endpoint_urls_and_the_launch_command() -> None:
    assert base_url("http://h:8000") == base_url("http://h:8000/v1/") == "http://h:8000/v1"
    with pytest.raises(BadInputError, match="http://"):
        base_url("h:8000")
    command = launch_command(
        Path("/m"), "bfloat16", 16, 1234,
        {"enable_chunked_prefill": True, "enforce_eager": False, "max_num_batched_tokens": 32768,
         "enable_prefix_caching": False, "tensor_parallel_size": None, "gpu_memory_utilization": 0.8},
    )  # fmt: skip
    text = " ".join(command)
    assert "vllm.entrypoints.openai.api_server --model /m" in text and "--host 127.0.0.1 --port 1234" in text
    assert "--max-num-seqs 16" in text and "--enable-chunked-prefill" in text
    assert "--no-enable-prefix-caching" in text and "--max-num-batched-tokens 32768" in text
    assert "--enforce-eager" not in text and "tensor-parallel" not in text and "api-key" not in text


def test_reuse_and_the_context_reach_the_backend(model_dir: Path) -> None:
    with fake_openai() as fake:
        backend = load_backend("server", model_dir, server_arm(), None, BackendContext(endpoint=fake.url))
        try:
            assert backend.describe()["endpoint"] == fake.url
        finally:
            backend.close()


def test_each_final_failure_carries_its_own_advice() -> None:
    """The advice comes from the failure's class, never from its text: a URL whose port holds "404"
    does not make a refused body a model-id problem."""
    import httpx

    from capsule.generation.backends.server_endpoint import Endpoint
    from capsule.generation.backends.server_protocol import (
        KeyRefused,
        NoTokenIds,
        RequestFailed,
        UnknownModel,
        _status_failure,
    )

    url = "http://127.0.0.1:40404/v1/completions"
    endpoint = Endpoint("http://127.0.0.1:40404/v1", MODEL_ID, {}, {"models": [MODEL_ID]}, "MY_KEY")
    advice = {
        code: _status_failure(httpx.Response(code, content=b"detail"), url).advice(endpoint)
        for code in (401, 404, 400)
    }
    assert advice[401] == "; put the endpoint's key in $MY_KEY"
    assert advice[404] == f"; the endpoint serves ['{MODEL_ID}']: set backend_options.model_id"
    assert "OpenAI-compatible vLLM" in advice[400]
    assert isinstance(_status_failure(httpx.Response(403), url), KeyRefused)
    assert isinstance(_status_failure(httpx.Response(404), url), UnknownModel)
    located = NoTokenIds("the reply carries text but no token_ids", retryable=False).at(url)
    assert isinstance(located, NoTokenIds) and str(located).startswith(url) and located.advice(endpoint) == ""
    assert type(RequestFailed("x", True).at(url)) is RequestFailed
