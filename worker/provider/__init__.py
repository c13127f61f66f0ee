"""The Docker provider: claims jobs for its labels and runs each attempt in a fresh job container.

service      ``forge-ci provider run``: start-up cleanup, slots, stopping
claims       ``POST claims`` with the provider token; long polls; replays of lost answers
state        the state directory: provider id, claims persisted before they are sent
execution    one assignment: socket, relay, workspace, container, output, removal
relay        the per-attempt runner API socket, forwarding only that attempt's endpoints
upstream     the server's origin and connections to it
containers   the only module of forge-ci that imports the ``docker`` SDK
socket_dirs  the per-attempt directory through which a job reaches the runner API
"""
