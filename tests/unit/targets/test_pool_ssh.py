"""The pool's ssh key file: written once, whole, however many hosts are probed at once."""

import threading

from runner.targets.pool import ssh
from runner.targets.pool.inventory import Host

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "A" * 4000 + "\n-----END OPENSSH PRIVATE KEY-----"


def test_hosts_probed_at_once_share_one_whole_key_file(monkeypatch, tmp_path):
    """Three hosts of a parameter-server job were probed in threads and two wrote the key file at
    once: FileExistsError, a traceback. Every thread gets the one file, with the whole key, 0600."""
    monkeypatch.setattr(ssh, "_private_dir", tmp_path)
    monkeypatch.setenv("TFTRAIN_RACE_KEY", KEY)
    hosts = [Host(name=f"h{n}", address=f"10.0.0.{n}", identity_env="TFTRAIN_RACE_KEY") for n in range(48)]
    start = threading.Barrier(len(hosts))
    paths, failures = [], []

    def probe(host):
        start.wait()
        try:
            path = ssh.identity_file(host)
            paths.append((path, path.read_text()))
        except Exception as exc:  # the race this test is about
            failures.append(exc)

    threads = [threading.Thread(target=probe, args=(host,)) for host in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert {path for path, _ in paths} == {tmp_path / "TFTRAIN_RACE_KEY.key"}
    assert {text for _, text in paths} == {KEY + "\n"}
    assert (tmp_path / "TFTRAIN_RACE_KEY.key").stat().st_mode & 0o777 == 0o600


def test_no_key_in_the_environment_means_ssh_s_own(monkeypatch, tmp_path):
    monkeypatch.setattr(ssh, "_private_dir", tmp_path)
    monkeypatch.delenv("TFTRAIN_RACE_KEY", raising=False)
    assert ssh.identity_file(Host(name="h", address="h", identity_env="TFTRAIN_RACE_KEY")) is None
    assert list(tmp_path.iterdir()) == []
