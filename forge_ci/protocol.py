"""Runner wire types shared by the coordinator and the in-container runner.

PLACEHOLDER: the runner-protocol work replaces this module. It exists now so that the runner image
(deploy/runner.Dockerfile) can copy it. Standard library only: the runner imports it under
``python3 -S``.
"""
