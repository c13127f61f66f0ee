"""Setup code shared by the test suite and the benchmarks (``tests/`` and ``bench/`` import it).

Never imported by forge-ci itself (an import-linter contract says so): nothing here is on a
deployed server's path, so it may do what a deployment must not (start a push server whose
named repositories run without hooks, for the push benchmark's baseline).

    corpus        where the third-party workflow corpus is (shared/corpus)
    keys          real SSH key pairs made with ssh-keygen
    git           GitClient: git over OpenSSH as one person, with a private HOME
    redis         RedisServer: a private redis-server on a Unix socket
    forge         Forge: a whole forge-ci (web, ssh, worker, provider) in child processes
    web_server    running_web: a real ``forge-ci web`` (gunicorn) on a loopback port
    slow_clients  Trickle: slow-client attacks (a byte every few seconds, or nothing) on loopback
    unhooked_ssh  ``python -m forge_ci_testing.unhooked_ssh OWNER/NAME...`` (push benchmark)
"""
