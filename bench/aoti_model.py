"""A random Qwen2 model with Qwen2.5-1.5B dimensions, L layers and a cut vocabulary, saved
with save_pretrained (bench/aoti_count.sh). Usage: aoti_model.py DIR LAYERS VOCAB"""
import sys

from rvv_inductor.demo import models

d, layers, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cfg = models.config_dict("qwen2.5-1.5b", layers)
cfg["vocab_size"] = vocab
models.build({"seed": 0, "config": cfg}).save_pretrained(d)
print(f"saved {d}")
