"""The lifecycle features, one module each, plugged into the planner through
``planning/feature.py`` and listed in rule order in ``planning/lifecycle.py``
(docs/design.md §4, "Lifecycle features"). A feature imports the planner's shared facts
(``turn``, ``reasons``, ``context``, ``slice_state``), never another feature."""
