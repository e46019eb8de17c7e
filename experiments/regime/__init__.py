"""The efficiency verdict by regime (docs/regimes.md): the paper protocol's runs at several
prompts per step, one efficiency study per size (``python -m experiments.efficiency
--protocol paper --batch-size B ...``), read together from their folders by
``python -m experiments.regime CELL_DIR ... --out DIR``."""
