"""The reading machinery every source shares, apart from the modules of the formats (:mod:`forensics.sources`).

* :mod:`.base`: the result of a parse (:class:`~.base.SourceResult`) and the one ``events`` table maker;
* :mod:`.envelope`: the stamp, host, level and program a line of a line-oriented log starts with;
* :mod:`.prefix`: the launcher and logger prefixes peeled off a job's output lines;
* :mod:`.records`: lines folded into records (tracebacks, stacks, chains) by line classes and a state machine;
* :mod:`.chunks`: a big input cut into chunks where no record can span;
* :mod:`.interest`: the lines of interest of a chunk, found in one multi-pattern pass;
* :mod:`.metrics`: trainers' step lines read into the ``metrics`` table;
* :mod:`.fields`: small helpers the families' enrichers share (numbers, ``key=value`` data).

A module here knows no format: it is given the patterns, families and options of the source that calls it.
"""
