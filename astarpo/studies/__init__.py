"""The LLM studies and their harness: ``astarpo study NAME`` (``astarpo study --list``).

``harness`` (what every study shares: the protocol, one run per fresh process on a stated
clock, the sweep, the report writer), one subpackage per study (``efficiency``: A*-PO against
the baselines on one wall-clock budget; ``zero_pass``: prompts the reference never solves) and
``registry`` (:data:`~astarpo.studies.registry.STUDIES`). It sits above :mod:`astarpo.llm`,
which never imports it; a study imports only the harness and itself.
"""
