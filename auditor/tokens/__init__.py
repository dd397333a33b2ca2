"""Tokens stage: exact token counts for the model that will read the windows.

- ``tokenizer``: the model's tokenizer and chat template (or an explicit tokenizer), and
  counts of prompts as the chat template renders them.
"""

