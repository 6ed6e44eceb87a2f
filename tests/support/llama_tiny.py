"""A real llama.cpp server for tests: a tiny random-weight GGUF the test writes, served by llama-cpp-python on 127.0.0.1.

Nothing is downloaded: the model is a two-layer llama with a 354-token SentencePiece-style
vocabulary (control tokens, the 256 byte tokens, printable ASCII) and seeded random
weights, about 400 KB. Its answers are noise, so the tests steer them with llama.cpp's
own GBNF ``grammar`` request option, which the server honours token by token.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import requests

HOST = "127.0.0.1"
ALIAS = "tiny-llama"
_EMBED, _HEADS, _LAYERS, _FFN = 64, 4, 2, 128


def _vocabulary() -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and types: <unk> <s> </s>, the byte tokens, then "▁" and printable ASCII."""
    import gguf

    kinds = gguf.TokenType
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [kinds.UNKNOWN, kinds.CONTROL, kinds.CONTROL] + [kinds.BYTE] * 256
    pieces = ["\u2581"] + [chr(c) for c in range(0x21, 0x7F)]
    tokens += pieces
    types += [kinds.NORMAL] * len(pieces)
    return tokens, [0.0] * len(tokens), [int(t) for t in types]


def write_tiny_llama(path: Path, seed: int = 7) -> Path:
    """A loadable llama-architecture GGUF with random weights: small enough to write in a test."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    tokens, scores, types = _vocabulary()
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("envelope-ci tiny llama (random weights)")
    writer.add_context_length(512)
    writer.add_embedding_length(_EMBED)
    writer.add_block_count(_LAYERS)
    writer.add_feed_forward_length(_FFN)
    writer.add_head_count(_HEADS)
    writer.add_head_count_kv(_HEADS)
    writer.add_rope_dimension_count(_EMBED // _HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)

    def weights(*shape: int) -> np.ndarray:
        return rng.normal(0.0, 0.02, size=shape).astype(np.float32)

    ones = np.ones(_EMBED, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weights(len(tokens), _EMBED))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", weights(len(tokens), _EMBED))
    for layer in range(_LAYERS):
        blk = f"blk.{layer}"
        writer.add_tensor(f"{blk}.attn_norm.weight", ones)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{blk}.{name}.weight", weights(_EMBED, _EMBED))
        writer.add_tensor(f"{blk}.ffn_norm.weight", ones)
        writer.add_tensor(f"{blk}.ffn_gate.weight", weights(_FFN, _EMBED))
        writer.add_tensor(f"{blk}.ffn_up.weight", weights(_FFN, _EMBED))
        writer.add_tensor(f"{blk}.ffn_down.weight", weights(_EMBED, _FFN))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def free_port() -> int:
    """A port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 with the given model, started and stopped as a context manager.

    ``interrupt_requests`` is the server's own default (True): it cuts a stream with a bare
    ``[DONE]`` as soon as another request waits, which is what rule 8 is about.
    """

    def __init__(self, model: Path, log: Path, *, interrupt_requests: bool = True, start_timeout_s: float = 60.0) -> None:
        self.model, self.log, self.interrupt = model, log, interrupt_requests
        self.start_timeout_s = start_timeout_s
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def __enter__(self) -> LlamaServer:
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--model_alias", ALIAS,
               "--host", HOST, "--port", str(self.port), "--n_ctx", "512", "--chat_format", "chatml",
               "--interrupt_requests", str(self.interrupt)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        """Poll /v1/models until the model is loaded; fail with the server's log if it dies or takes too long."""
        assert self.proc is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited {self.proc.returncode}:\n{self.log.read_text('utf-8', 'replace')[-3000:]}")
            try:
                if requests.get(f"{self.url}/models", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.__exit__(None, None, None)
        raise RuntimeError(f"llama_cpp.server not ready in {self.start_timeout_s:g} s:\n{self.log.read_text('utf-8', 'replace')[-3000:]}")

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
