"""The Docker provider: claims jobs for its labels and runs each attempt in a fresh job container.

``containers`` is the only module of forge-ci that imports the ``docker`` SDK; ``socket_dirs``
prepares the per-attempt directory through which a job reaches the runner API.
"""
