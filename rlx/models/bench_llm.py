"""``rlx bench llm``: prompt processing and decode tokens/s of rlx and
llama.cpp (llama-cpp-python) on the same GGUF file, the same token ids and
the same thread count, each engine in a process of its own (so neither
sees the other's caches, threads or memory), with the ratios of one run
and each process's peak RSS; ``rounds`` repeats the pair, alternating
which engine goes first, and reports the median of the rounds' ratios.

The prompt's time is the fastest of PREFILL_REPEATS runs. Both decode
greedily for exactly ``gen`` tokens (EOS does not stop them):
rlx takes the device's argmax (``LLM.step(..., "token")``, or
``LLM.step_block`` where the model runs decode blocks: GPUs), llama.cpp
the argmax of its last logits row."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlx.errors import InputError

ENGINES = ("rlx", "llama.cpp")
PREFILL_REPEATS = 3   # the prompt is processed this many times (from an empty cache): the fastest counts
PROMPT_TEXT = ("The history of computing is a story of abstraction layered on abstraction: switches became "
               "gates, gates became processors, and processors ran programs written in languages that hid "
               "the machine. ")


def decode_step_times(llm: Any, steps: int, token: int = 2) -> list[float]:
    """Seconds of each of ``steps`` greedy decode steps (the device's argmax
    fed back), from wherever the LLM's cache stands."""
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        token = int(llm.step(token, output="token"))
        times.append(time.perf_counter() - t0)
    return times


def prompt_ids(tokenizer: Any, n: int) -> list[int]:
    """Exactly n token ids (BOS first) of a repeated English text."""
    ids: list[int] = tokenizer.encode(PROMPT_TEXT * (n // 16 + 2))
    return ids[:n]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0   # KiB on Linux


def _worker_rlx(model: str, ids: list[int], gen: int, ctx: int, device: str, prefill_precision: str) -> dict:
    from rlx.models.llm import LLM

    t0 = time.perf_counter()
    llm = LLM(model, device=device, max_context=ctx, prefill_precision=prefill_precision)
    tok = int(llm.prefill(ids, "token"))          # compiles the bucket and the decode step: warm-up
    tok = int(llm.step(tok, "token"))
    block = llm.decode_block if gen >= llm.decode_block > 1 else 1
    if block > 1:
        tok = llm.step_block(tok)[-1]             # and the decode block (GPUs: LLM.decode_block steps a launch)
    load_s = time.perf_counter() - t0
    prefill_s = float("inf")
    for _ in range(PREFILL_REPEATS):
        t0 = time.perf_counter()
        tok = int(llm.prefill(ids, "token"))
        prefill_s = min(prefill_s, time.perf_counter() - t0)
    t0 = time.perf_counter()
    tokens: list[int] = []
    while len(tokens) < gen:   # greedy, as generate() runs it: in blocks while gen allows
        if block > 1 and gen - len(tokens) >= block:
            tokens += [int(t) for t in llm.step_block(tok)]
        else:
            tokens.append(int(llm.step(tok, "token")))
        tok = tokens[-1]
    decode_s = time.perf_counter() - t0
    return {"load_s": load_s, "prefill_s": prefill_s, "decode_s": decode_s, "kv_cache_bytes": llm.kv_cache_bytes,
            "device": llm._first.device.info.name if llm._first is not None else device, "tokens": tokens}


def _worker_llama(model: str, ids: list[int], gen: int, ctx: int, threads: int) -> dict:
    import numpy as np
    from llama_cpp import Llama

    t0 = time.perf_counter()
    llm = Llama(model, n_ctx=ctx, n_threads=threads, n_threads_batch=threads, n_batch=ctx,
                verbose=False)
    llm.eval(ids)
    llm.reset()
    load_s = time.perf_counter() - t0
    prefill_s = float("inf")
    for _ in range(PREFILL_REPEATS):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        prefill_s = min(prefill_s, time.perf_counter() - t0)
    n_vocab = llm.n_vocab()

    def last_argmax() -> int:
        # The last token's logits row in llama.cpp's own buffer: without
        # logits_all, llama-cpp-python (0.3) no longer copies it to
        # `scores`, whose rows stay zero (an argmax of zeros fed token 0).
        row = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(n_vocab,))
        return int(np.argmax(row))

    tok = last_argmax()
    t0 = time.perf_counter()
    tokens = []
    for _ in range(gen):
        llm.eval([tok])
        tok = last_argmax()
        tokens.append(tok)
    decode_s = time.perf_counter() - t0
    import llama_cpp

    return {"load_s": load_s, "prefill_s": prefill_s, "decode_s": decode_s, "version": llama_cpp.__version__,
            "tokens": tokens}


def _worker(argv: list[str]) -> None:
    spec = json.loads(argv[0])
    if spec["engine"] == "rlx":
        out = _worker_rlx(spec["model"], spec["ids"], spec["gen"], spec["ctx"], spec["device"],
                          spec["prefill_precision"])
    else:
        out = _worker_llama(spec["model"], spec["ids"], spec["gen"], spec["ctx"], spec["threads"])
    out["peak_rss_mb"] = _peak_rss_mb()
    print("RESULT " + json.dumps(out), flush=True)


def run_engine(engine: str, model: str, ids: list[int], gen: int, ctx: int, threads: int, device: str,
               prefill_precision: str = "f32") -> dict:
    """One engine in a child process (same thread count through the
    environment for rlx, n_threads for llama.cpp)."""
    from rlx import env as rlx_env

    env = rlx_env.with_num_threads(dict(os.environ, OMP_NUM_THREADS=str(threads)), threads)
    spec = {"engine": engine, "model": model, "ids": ids, "gen": gen, "ctx": ctx, "threads": threads,
            "device": device, "prefill_precision": prefill_precision}
    proc = subprocess.run([sys.executable, "-m", "rlx.models.bench_llm", json.dumps(spec)], capture_output=True,
                          text=True, env=env)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"error": f"{engine} exited with {proc.returncode}: " + " | ".join(tail)}
    return json.loads(line[len("RESULT "):])


def run_benchmark(model: str, *, prompt_tokens: int = 128, gen: int = 256, ctx: int | None = None,
                  threads: int = 2, device: str = "cpu", engines: tuple[str, ...] = ENGINES,
                  prefill_precision: str = "f32", rounds: int = 1,
                  log: Callable[[str], None] = lambda _: None) -> dict:
    """rlx and llama.cpp on the same file and prompt, each in its own
    process; prefill_precision: rlx's (LLM's argument: "bf16" multiplies the
    prompt in bf16 on the CPU). With rounds > 1 the engines take turns
    (rlx then llama.cpp, then the other way round, and so on), each round's
    ratio pairs two runs minutes apart at most, and the report gives each
    engine's median round and the median of the rounds' ratios: a shared
    machine whose speed drifts during the runs moves both engines of a
    round, where one run each would compare two different machines."""
    from rlx.models.llm import resolve_model
    from rlx.tokenizer import Tokenizer

    if rounds < 1:
        raise InputError(f"rounds must be at least 1, got {rounds}")
    path = str(resolve_model(model))
    ids = prompt_ids(Tokenizer.from_gguf(path), prompt_tokens)
    ctx = ctx or max(512, prompt_tokens + gen + 8)
    per_round: list[dict] = []
    for turn in range(rounds):
        rows = {}
        for engine in engines if turn % 2 == 0 else tuple(reversed(engines)):
            log(f"{engine}{f' (round {turn + 1} of {rounds})' if rounds > 1 else ''}: {len(ids)} prompt tokens, "
                f"{gen} generated, {threads} threads, context {ctx} ...")
            r = run_engine(engine, path, ids, gen, ctx, threads, device, prefill_precision)
            if "error" not in r:
                r["prefill_tok_s"] = len(ids) / r["prefill_s"]
                r["decode_tok_s"] = gen / r["decode_s"]
            rows[engine] = r
        per_round.append({e: rows[e] for e in engines})
    report = {"model": path, "prompt_tokens": len(ids), "generated_tokens": gen, "context": ctx,
              "threads": threads, "device": device, "prefill_precision": prefill_precision,
              "engines": {e: _median_round([r[e] for r in per_round]) for e in engines}, "machine": _machine()}
    first = per_round[0]
    if all("tokens" in first.get(e, {}) for e in ("rlx", "llama.cpp")):
        a, b = first["rlx"]["tokens"], first["llama.cpp"]["tokens"]
        report["greedy_tokens_agree"] = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    ratios = [_ratios(r) for r in per_round]
    if all(ratios):
        report["decode_ratio"] = statistics.median(r[0] for r in ratios)
        report["prefill_ratio"] = statistics.median(r[1] for r in ratios)
    if rounds > 1:
        report["rounds"] = per_round
        if all(ratios):
            report["round_ratios"] = [{"decode": d, "prefill": p} for d, p in ratios]
    return report


def _ratios(rows: dict) -> tuple[float, float] | None:
    """(decode, prompt) tokens/s of rlx over llama.cpp in one round, or None."""
    a, b = rows.get("rlx", {}), rows.get("llama.cpp", {})
    if "decode_tok_s" not in a or "decode_tok_s" not in b:
        return None
    return a["decode_tok_s"] / b["decode_tok_s"], a["prefill_tok_s"] / b["prefill_tok_s"]


def _median_round(runs: list[dict]) -> dict:
    """An engine's runs as one row (an error if any run failed): the
    decode of the run of median decode speed, the prompt of the run of
    median prompt speed (the lower middle run of an even count), and the
    largest peak RSS of all runs."""
    failed = [r for r in runs if "error" in r]
    if failed:
        return failed[0]

    def middle(key: str) -> dict:
        return sorted(runs, key=lambda r: r[key])[(len(runs) - 1) // 2]

    row = dict(middle("decode_tok_s"))
    prompt = middle("prefill_tok_s")
    row["prefill_s"], row["prefill_tok_s"] = prompt["prefill_s"], prompt["prefill_tok_s"]
    row["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    return row


def _machine() -> dict:
    info = {"python": sys.version.split()[0]}
    try:
        cpu = Path("/proc/cpuinfo").read_text()
        model = next((x.split(":", 1)[1].strip() for x in cpu.splitlines() if x.startswith("model name")), "")
        flags = next((x.split(":", 1)[1].split() for x in cpu.splitlines() if x.startswith("flags")), [])
        info["cpu"] = model
        info["isa"] = [f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile") if f in flags]
        info["cores"] = os.cpu_count()
    except OSError:
        pass
    return info


def format_report(report: dict) -> str:
    lines = []
    if "round_ratios" in report:
        lines += [f"round {i + 1}: rlx {r['rlx']['decode_tok_s']:.1f}, llama.cpp {r['llama.cpp']['decode_tok_s']:.1f} "
                  f"decode tok/s: decode {q['decode']:.2f}x, prompt {q['prefill']:.2f}x"
                  for i, (r, q) in enumerate(zip(report["rounds"], report["round_ratios"]))]
    rounds = len(report.get("rounds", ())) or 1
    lines.append(f"{'engine':<10} {'prompt tok/s':>13} {'decode tok/s':>13} {'peak RSS MB':>12}"
                 + (f"   (medians of {rounds} rounds)" if rounds > 1 else ""))
    for engine, r in report["engines"].items():
        if "error" in r:
            lines.append(f"{engine:<10} {r['error']}")
            continue
        lines.append(f"{engine:<10} {r['prefill_tok_s']:>13.1f} {r['decode_tok_s']:>13.1f} {r['peak_rss_mb']:>12.0f}")
    if "decode_ratio" in report:
        lines.append(f"rlx / llama.cpp: prompt {report['prefill_ratio']:.2f}x, decode {report['decode_ratio']:.2f}x "
                     f"({'median of the rounds; ' if rounds > 1 else ''}"
                     f"{report['prompt_tokens']} prompt tokens, {report['generated_tokens']} generated, "
                     f"{report['threads']} threads, rlx's prefill in {report['prefill_precision']})")
    if "greedy_tokens_agree" in report:
        lines.append(f"greedy tokens: the engines' first {report['greedy_tokens_agree']} of "
                     f"{report['generated_tokens']} agree (llama.cpp's CPU kernels quantize activations to 8 bits)")
    return "\n".join(lines)


if __name__ == "__main__":
    _worker(sys.argv[1:])
