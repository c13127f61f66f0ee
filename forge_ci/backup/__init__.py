"""Backups of an installation and their restore (``forge-ci backup DIR`` / ``forge-ci restore``).

A backup is a directory::

    DIR/
      manifest.json          format, forge-ci version, schema revision, database kind, every
                             repository's refs, and the size and SHA-256 of every other file
      database/forge-ci.sqlite3   SQLite: a copy made with SQLite's online backup API
      database/forge-ci.sql       PostgreSQL: pg_dump's plain SQL (no owners, no grants)
      files/                 secrets.key (seals repository secrets), the session secret key,
                             the SSH host key pair, forge-ci.toml when there is one
      repositories/<owner>/<name>.git/   every managed repository, hidden pins included
      action-cache/<name>.git/           upstream actions fetched for runs, with their pins

Order is what makes it consistent: the database first, then each repository under its write
lock (refs, config and HEAD while the lock is held; the objects after it, since git objects are
only ever added). Runs pin their commits *before* their database transaction commits, so
every run, push event and action in the database snapshot finds its pinned objects in the
repositories. A push accepted after the database snapshot is in the repositories without its
push event: restoring gives the ref, not the runs it would have started.

The backup is written into ``DIR.partial-*`` and renamed to DIR when complete, so a backup that
was interrupted never looks like one. Restore checks everything before it writes anything: the
format, the schema revision (a newer one than this forge-ci knows is refused), every checksum
(and that no file was added), an empty data directory and an empty database.
"""
