"""GitHub actions in the runner (standard library only, like the rest of worker/runner).

::

    commands    workflow commands on stdout/stderr, parsed as the GitHub runner parses them
    sink        what each command does (masks, groups, annotations, deprecated set-output...)
    trees       action trees downloaded through the attempt's API, checked, unpacked
    inputs      INPUT_* from ``with`` and the action's defaults; required inputs
    executor    node actions (pre/main/post) and composite actions (nested)
"""
