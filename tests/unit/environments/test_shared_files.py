import os

from runner.environments.shared_files import MIN_SIZE, STORE, share_files

BIG = b"t" * (MIN_SIZE + 1)


def env(cache, name, files):
    root = cache / "envs" / name
    for relative, (data, mode) in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)
    return root


def test_a_second_environment_with_the_same_bytes_links_them(tmp_path):
    first = env(tmp_path, "a", {"lib/tf.so": (BIG, 0o755), "lib/small.py": (b"x", 0o644)})
    second = env(tmp_path, "b", {"lib/tf.so": (BIG, 0o755), "lib/small.py": (b"x", 0o644)})
    assert share_files(first, tmp_path).linked == 0
    shared = share_files(second, tmp_path)
    assert (shared.linked, shared.saved) == (1, len(BIG))
    assert os.path.samefile(first / "lib/tf.so", second / "lib/tf.so")
    assert (second / "lib/tf.so").read_bytes() == BIG and os.access(second / "lib/tf.so", os.X_OK)
    assert not os.path.samefile(first / "lib/small.py", second / "lib/small.py")  # too small to be worth it
    assert not list((second / "lib").glob(".*"))  # no temporary name left


def test_different_bytes_or_modes_are_kept_apart(tmp_path):
    first = env(tmp_path, "a", {"x.so": (BIG, 0o755), "y.so": (BIG, 0o755)})
    second = env(tmp_path, "b", {"x.so": (b"u" * len(BIG), 0o755), "y.so": (BIG, 0o644)})
    share_files(first, tmp_path)
    assert share_files(second, tmp_path).linked == 0
    assert (second / "x.so").read_bytes() == b"u" * len(BIG) and (second / "y.so").stat().st_mode & 0o777 == 0o644


def test_a_removed_environment_frees_its_bytes_at_the_next_build(tmp_path):
    import shutil

    first = env(tmp_path, "a", {"x.so": (BIG, 0o644)})
    share_files(first, tmp_path)
    shutil.rmtree(first)
    third = env(tmp_path, "c", {"z.so": (b"z" * len(BIG), 0o644)})
    shared = share_files(third, tmp_path)
    kept = [path for path in (tmp_path / STORE).rglob("*") if path.is_file()]
    assert shared.dropped == 1 and [path.read_bytes() for path in kept] == [b"z" * len(BIG)]


def test_symlinks_are_never_followed_or_replaced(tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(BIG)
    first = env(tmp_path, "a", {"x.so": (BIG, 0o644)})
    (first / "link.so").symlink_to(outside)
    share_files(first, tmp_path)
    assert (first / "link.so").is_symlink() and outside.stat().st_nlink == 1


def test_it_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TFTRAIN_SHARE_ENV_FILES", "0")
    first = env(tmp_path, "a", {"x.so": (BIG, 0o644)})
    second = env(tmp_path, "b", {"x.so": (BIG, 0o644)})
    share_files(first, tmp_path)
    assert share_files(second, tmp_path).linked == 0 and not (tmp_path / STORE).exists()
