"""The tools CI's simulator step relies on: the subset chooser and its check."""

import json

import cudasim_subset as cs


def _log(tmp_path, name, recs):
    path = tmp_path / name
    lines = [json.dumps({"test": t, "used": u, "compiled": [], "seconds": s}) for t, u, s in recs]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_chooser_covers_every_key_cheaply_and_keeps_tests_without_kernels(tmp_path):
    full = _log(
        tmp_path,
        "full.jsonl",
        [("a", ["k1", "k2"], 10.0), ("b", ["k1"], 1.0), ("c", ["k2"], 1.0), ("d", [], 0.1)],
    )
    chosen = cs.choose(cs.read_log(full), cs.read_seconds(full))
    assert chosen == ["b", "c", "d"]


def test_the_check_fails_on_a_variant_not_launched(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cs, "KERNELS", tmp_path / "kernels.txt")
    cs.KERNELS.write_text("k1\nk2\n")
    assert cs.main(["check", str(_log(tmp_path, "all.jsonl", [("a", ["k1", "k2"], 1.0)]))]) == 0
    assert cs.main(["check", str(_log(tmp_path, "some.jsonl", [("a", ["k1"], 1.0)]))]) == 1
    assert "not launched: k2" in capsys.readouterr().out
