"""llama.cpp's convert_hf_to_gguf.py on a probe slice (`moe_probe --peer`), by the rehearsal env.

Its Gemma 4 vocabulary path reads only a SentencePiece-style BPE (`gguf.LlamaHfVocab`: a
tokenizer.json with `byte_fallback` and a `Sequence` decoder, as Google's); the slice's is a
byte-level BPE of GPT-2's kind, so it takes the converter's GPT-2 path, its pre-tokenizer named
("gpt-2") since the converter knows one only by a published model's hash. The benches feed ids.
Usage: `python peer_gguf.py <llama.cpp source> <the converter's arguments>`."""

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    source = Path(sys.argv[1])
    sys.path[:0] = [str(source), str(source / "gguf-py")]
    from conversion.base import TextModel  # the vendored converter's, on the path just set
    from conversion.gemma import Gemma4Model

    Gemma4Model.set_vocab = TextModel._set_vocab_gpt2
    TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
    sys.argv = [str(source / "convert_hf_to_gguf.py"), *sys.argv[2:]]
    runpy.run_path(sys.argv[0], run_name="__main__")
