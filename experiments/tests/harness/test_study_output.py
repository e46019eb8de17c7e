"""A study's output folder: ``--overwrite`` deletes exactly what the study recorded, and a
folder holding files the study would write but did not is refused, nothing deleted."""

from __future__ import annotations

import pytest

from experiments.harness.output import OutputDir


def test_an_earlier_run_is_refused_or_cleared(tmp_path):
    out = OutputDir(tmp_path, "bench", ("reference",))
    out.clear(overwrite=False)  # an empty or new folder is fine
    out.record("runs/astarpo-seed0")
    assert out.record("bench.json") == tmp_path / "bench.json"
    (tmp_path / "runs" / "astarpo-seed0").mkdir(parents=True)
    (tmp_path / "bench.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"earlier run of this study \(2 paths.*--overwrite"):
        out.clear(overwrite=False)
    assert (tmp_path / "runs" / "astarpo-seed0").is_dir()  # nothing deleted
    out.clear(overwrite=True)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "bench.json").exists()
    assert not out.manifest.exists() and out.manifest.name == "bench_manifest.json"
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("overwrite", [False, True])
def test_overwrite_never_deletes_what_the_study_did_not_write(tmp_path, overwrite):
    """A user's run folder and bench.md survive --overwrite; so does another study's output."""
    out = OutputDir(tmp_path, "bench", ("reference",))
    (tmp_path / "runs" / "my_experiment").mkdir(parents=True)
    (tmp_path / "runs" / "my_experiment" / "metrics.jsonl").write_text("x\n")
    (tmp_path / "bench.md").write_text("n\n")
    with pytest.raises(FileExistsError, match="did not write") as err:
        out.clear(overwrite=overwrite)
    assert "earlier run" not in str(err.value)
    assert "runs/my_experiment" in str(err.value) and "bench.md" in str(err.value)
    assert (tmp_path / "runs" / "my_experiment" / "metrics.jsonl").read_text() == "x\n"
    assert (tmp_path / "bench.md").read_text() == "n\n"
    (tmp_path / "bench.md").unlink()  # beside a run of ours, a foreign folder still blocks
    out.record("runs/astarpo-seed0")
    (tmp_path / "runs" / "astarpo-seed0").mkdir()
    with pytest.raises(FileExistsError, match="runs/my_experiment"):
        out.clear(overwrite=True)
    assert (tmp_path / "runs" / "astarpo-seed0").is_dir()
    other = OutputDir(tmp_path, "zero_pass", ("reference",))  # the bench's run is not its own
    with pytest.raises(FileExistsError, match="runs/astarpo-seed0"):
        other.clear(overwrite=True)


def test_a_manifest_that_is_not_a_list_of_relative_paths_is_refused(tmp_path):
    out = OutputDir(tmp_path, "t")
    for text in ("{", '["/etc/passwd"]', '["../up"]', '{"a": 1}'):
        out.manifest.write_text(text)
        with pytest.raises(ValueError, match="move it away"):
            out.clear(overwrite=True)


def test_runs_recorded_from_threads_all_land_in_the_manifest(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    out = OutputDir(tmp_path, "t")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: out.record(f"runs/r{i}"), range(200)))
    assert sorted(out.recorded()) == sorted(f"runs/r{i}" for i in range(200))


def test_resume_keeps_an_earlier_run_and_excludes_overwrite(tmp_path):
    out = OutputDir(tmp_path, "bench", ("reference",))
    out.record("runs/astarpo-seed0")
    (tmp_path / "runs" / "astarpo-seed0").mkdir(parents=True)
    with pytest.raises(FileExistsError, match="--resume"):
        out.clear(overwrite=False)
    out.clear(overwrite=False, resume=True)
    assert (tmp_path / "runs" / "astarpo-seed0").is_dir() and out.recorded()
    with pytest.raises(ValueError, match="choose one"):
        out.clear(overwrite=True, resume=True)
    assert (tmp_path / "runs" / "astarpo-seed0").is_dir()
    (tmp_path / "runs" / "mine").mkdir()  # a folder the study did not write still blocks
    with pytest.raises(FileExistsError, match="runs/mine"):
        out.clear(overwrite=False, resume=True)
