from __future__ import annotations

from pathlib import Path

import pytest

from forge_ci.errors import ConfigurationError
from forge_ci.settings import load_settings, parse_listen


def test_defaults_derive_from_the_data_directory(tmp_path: Path) -> None:
    settings = load_settings(env={"FORGE_CI_DATA_DIR": str(tmp_path)})
    assert settings.data_dir == tmp_path
    assert settings.database_url == f"sqlite:///{tmp_path / 'forge-ci.db'}"
    assert settings.redis_url == f"unix://{tmp_path / 'run' / 'redis.sock'}"
    assert settings.ssh_listen == ("127.0.0.1", 2222)
    assert settings.web_listen == ("127.0.0.1", 8080)
    assert settings.repositories_dir == tmp_path / "repositories"
    assert settings.hooks_dir == tmp_path / "hooks"
    assert settings.public_url == "http://127.0.0.1:8080"
    assert settings.push_report_wait == 1.5
    waits_not = load_settings(
        env={"FORGE_CI_DATA_DIR": str(tmp_path), "FORGE_CI_PUSH_REPORT_WAIT": "0"}
    )
    assert waits_not.push_report_wait == 0


def test_environment_overrides_the_file_which_overrides_defaults(tmp_path: Path) -> None:
    config = tmp_path / "forge-ci.toml"
    config.write_text('ssh_listen = "127.0.0.1:2022"\nweb_listen = "127.0.0.1:9000"\n')
    settings = load_settings(
        env={"FORGE_CI_DATA_DIR": str(tmp_path), "FORGE_CI_WEB_LISTEN": "[::1]:9100"}
    )
    assert settings.ssh_listen == ("127.0.0.1", 2022)  # from the file in the data directory
    assert settings.web_listen == ("::1", 9100)  # the environment wins
    assert settings.public_url == "http://[::1]:9100"
    assert settings.ssh_url == "ssh://git@127.0.0.1:2022"
    # Listening on every interface, behind a published port: what people push to is its own.
    published = load_settings(
        env={
            "FORGE_CI_DATA_DIR": str(tmp_path),
            "FORGE_CI_SSH_LISTEN": "0.0.0.0:2222",
            "FORGE_CI_PUBLIC_SSH_URL": "ssh://git@forge.example.com:2200/",
        }
    )
    assert published.ssh_url == "ssh://git@forge.example.com:2200"


@pytest.mark.parametrize("value", ["2222", "host:", ":80", "host:port", "h:70000", "[::1]2222"])
def test_bad_listen_addresses_are_refused_with_the_variable_named(value: str) -> None:
    with pytest.raises(ConfigurationError, match="FORGE_CI_SSH_LISTEN must be HOST:PORT"):
        parse_listen(value, "FORGE_CI_SSH_LISTEN")


def test_unknown_keys_in_the_file_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "other.toml"
    config.write_text('ssh_lisen = "127.0.0.1:2022"\n')
    with pytest.raises(ConfigurationError, match="unknown setting 'ssh_lisen'"):
        load_settings(env={"FORGE_CI_DATA_DIR": str(tmp_path), "FORGE_CI_CONFIG": str(config)})


def test_invalid_toml_and_missing_file_are_named(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("this is = = not toml")
    with pytest.raises(ConfigurationError, match="is not valid TOML"):
        load_settings(env={"FORGE_CI_DATA_DIR": str(tmp_path)}, config_file=config)
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_settings(env={"FORGE_CI_DATA_DIR": str(tmp_path)}, config_file=tmp_path / "nope")


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("FORGE_CI_REPO_LOCK_TIMEOUT", "-1", "greater than 0"),
        ("FORGE_CI_REPO_LOCK_TIMEOUT", "soon", "must be a number"),
        ("FORGE_CI_SSH_MAX_CONNECTIONS", "1.5", "positive whole number"),
        ("FORGE_CI_PUSH_REPORT_WAIT", "-0.5", "from 0 through 60 seconds"),
        ("FORGE_CI_PUSH_REPORT_WAIT", "61", "from 0 through 60 seconds"),
        ("FORGE_CI_PUSH_REPORT_WAIT", "nan", "from 0 through 60 seconds"),
        ("FORGE_CI_PUSH_REPORT_WAIT", "a while", "must be a number of seconds"),
        ("FORGE_CI_DATABASE_URL", "mysql://x", "sqlite:/// or postgresql"),
        ("FORGE_CI_PUBLIC_SSH_URL", "git@forge.example.com", "ssh://USER@HOST"),
        ("FORGE_CI_PUBLIC_SSH_URL", "ssh://git@forge.example.com:22/x", "ssh://USER@HOST"),
    ],
)
def test_bad_values_are_refused(tmp_path: Path, var: str, value: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        load_settings(env={"FORGE_CI_DATA_DIR": str(tmp_path), var: value})


def test_test_faults_need_testing_switched_on(tmp_path: Path) -> None:
    base = {"FORGE_CI_DATA_DIR": str(tmp_path)}
    assert load_settings(env=base).test_faults == ()
    with pytest.raises(ConfigurationError, match="FORGE_CI_TESTING is not 1"):
        load_settings(env={**base, "FORGE_CI_TEST_FAULTS": "pause-before-record"})
    with pytest.raises(ConfigurationError, match="unknown fault 'explode'"):
        load_settings(env={**base, "FORGE_CI_TESTING": "1", "FORGE_CI_TEST_FAULTS": "explode"})
    settings = load_settings(
        env={
            **base,
            "FORGE_CI_TESTING": "1",
            "FORGE_CI_TEST_FAULTS": "pause-before-record, job-minute-seconds=2",
        }
    )
    assert settings.test_fault("pause-before-record") is not None
    fault = settings.test_fault("job-minute-seconds")
    assert fault is not None and fault.argument == "2"
    assert settings.test_fault("pause-before-confirm") is None
    # No fault can switch a check off: the benchmark's push without hooks is not a fault.
    with pytest.raises(ConfigurationError, match="unknown fault 'unhooked'"):
        load_settings(env={**base, "FORGE_CI_TESTING": "1", "FORGE_CI_TEST_FAULTS": "unhooked=a/b"})


def test_the_configuration_file_cannot_switch_faults_on(tmp_path: Path) -> None:
    config = tmp_path / "forge-ci.toml"
    config.write_text('test_faults = "pause-before-record"\n')
    with pytest.raises(ConfigurationError, match="unknown setting 'test_faults'"):
        load_settings(env={"FORGE_CI_DATA_DIR": str(tmp_path)})


def test_action_sources(tmp_path: Path) -> None:
    base = {"FORGE_CI_DATA_DIR": str(tmp_path)}
    assert load_settings(env=base).action_sources == ("https://github.com",)
    assert load_settings(env={**base, "FORGE_CI_ACTION_SOURCES": "none"}).action_sources == ()
    both = "file:///srv/actions/, https://git.example.org  https://git.example.org"
    assert load_settings(env={**base, "FORGE_CI_ACTION_SOURCES": both}).action_sources == (
        "file:///srv/actions",
        "https://git.example.org",
    )
    config = tmp_path / "forge-ci.toml"
    config.write_text('action_sources = ["git://127.0.0.1:9418", "https://github.com"]\n')
    assert load_settings(env=base).action_sources == ("git://127.0.0.1:9418", "https://github.com")
    for value, message in (
        ("ftp://x", "is not a source URL"),
        ("none https://github.com", "'none' cannot be combined"),
        ("https://x/?a=1", "may not hold a query"),
    ):
        with pytest.raises(ConfigurationError, match=message):
            load_settings(env={**base, "FORGE_CI_ACTION_SOURCES": value})


def test_provider_egress(tmp_path: Path) -> None:
    base = {"FORGE_CI_DATA_DIR": str(tmp_path)}
    default = load_settings(env=base)
    assert (default.provider_egress, default.provider_egress_allow) == ("public", ())
    listed = load_settings(
        env={
            **base,
            "FORGE_CI_PROVIDER_EGRESS": "allow-list",
            "FORGE_CI_PROVIDER_EGRESS_ALLOW": "pypi.org:443, .pythonhosted.org 10.0.0.0/8:3141",
        }
    )
    assert listed.provider_egress_allow == ("pypi.org:443", ".pythonhosted.org", "10.0.0.0/8:3141")
    config = tmp_path / "forge-ci.toml"
    config.write_text('provider_egress = "allow-list"\nprovider_egress_allow = ["pypi.org"]\n')
    assert load_settings(env=base).provider_egress_allow == ("pypi.org",)
    config.unlink()
    for env, message in (
        ({"FORGE_CI_PROVIDER_EGRESS": "open"}, "FORGE_CI_PROVIDER_EGRESS.*'open' is not a policy"),
        ({"FORGE_CI_PROVIDER_EGRESS": "allow-list"}, "at least one --egress-allow"),
        ({"FORGE_CI_PROVIDER_EGRESS_ALLOW": "10.0.0.1/8"}, "host bits set"),
    ):
        with pytest.raises(ConfigurationError, match=message):
            load_settings(env={**base, **env})
