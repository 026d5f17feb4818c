"""Writes the prompts of the fidelity runs (scripts/fidelity/prompts.jsonl): chat requests whose prompts range
from a question of a dozen tokens to notes of about 1,000, and whose answers range from 8 to 96 tokens, so the
steps of a run mix short and long prefill chunks with decode batches of every size.

Deterministic (seeded); the words are drawn from a small list written here, since the model's cost per token does
not depend on what the words mean.

    python3 scripts/fidelity/prompts.py > scripts/fidelity/prompts.jsonl
"""

import json
import random

WORDS = (
    "the engine scheduler batch token prompt cache memory request server queue latency decode prefill slot model "
    "layer weight kernel thread core clock trace step chunk budget answer question river mountain city garden "
    "window morning evening summer winter music letter number market report table figure value error signal "
    "network packet disk file record stream reader writer join offset percentile median tail load replay"
).split()

QUESTIONS = [
    "What is the capital of France?",
    "Name three primary colors.",
    "Explain what a GPU does in one sentence.",
    "Why is the sky blue?",
    "Write a haiku about the sea.",
    "What does a compiler do?",
]


def notes(rng: random.Random, words: int) -> str:
    sentences = []
    left = words
    while left > 0:
        n = min(left, rng.randint(6, 16))
        s = " ".join(rng.choice(WORDS) for _ in range(n))
        sentences.append(s[0].upper() + s[1:] + ".")
        left -= n
    return " ".join(sentences)


def main() -> None:
    rng = random.Random(20261201)
    for i in range(64):
        # Prompt sizes log-uniform from ~10 to ~800 words (~15 to ~1,100 tokens); answers 8 to 96 tokens.
        words = int(10 * (80 ** rng.random()))
        question = QUESTIONS[i % len(QUESTIONS)]
        content = question if words < 16 else f"Summarise these notes in a few lines.\n\n{notes(rng, words)}"
        max_tokens = rng.choice([8, 16, 24, 32, 48, 64, 96])
        print(json.dumps({"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
                          "app_id": "fidelity"}))


if __name__ == "__main__":
    main()
