"""Pack stage: the repository cut into windows that fit the model's context, to the token.

Inputs: the walked files (``PackInput``), their index, the call graph, the rules and a
tokenizer. Output: a ``PackResult`` of ``Window`` objects (each a prompt with the files it
carries in full or as skeletons) and the files left out, with why.

- ``packer``: ``pack`` and ``PackOptions``: files ranked by relevance, counted exactly,
  filled into windows.
- ``chains``: the call chains (entry point -> ... -> sink) the packer keeps whole in one
  window.
- ``skeleton``: which lines of a file to keep when only its outline fits.
- ``scope``: which walked files an audit rule's windows carry (tests, fixtures,
  migrations, generated and seed code left out unless the rule asks).
- ``prompt``: the prompt text of a window: numbered file blocks, the repository map, the
  static candidates listed for the model to judge.
"""

