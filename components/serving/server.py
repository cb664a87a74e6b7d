"""The graph functions behind the exported signatures (components/serving/export.py holds the
contract: inputs, outputs, sampling and context rules), for one float or quantized Keras GPT.

Decoding keeps a per-layer key/value cache (components/model/decoding.py). Ended rows stop
costing forward passes (the cached step runs on the rows still decoding; an ended row costs a
copy of its cache slots per step), but the request returns when its longest row ends.

Past the window, per arch (decoding.can_slide): gpt2's positions index a table of T rows, so a
full row keeps its last T // 2 ids and re-fills its cache (positions restart at 0). A rotary
model's keys carry their positions: a full row's cache slides one slot per new token and its
positions keep counting, which is sliding-window attention over the whole sequence (each query
sees the last T keys in every layer; decoding's docstring).
"""

from __future__ import annotations

import tensorflow as tf

from components.config.tree import MAX_ROTARY_POSITION
from components.model import decoding
from components.serving import inputs, stops

DEFAULT_MAX_NEW_TOKENS_LIMIT = 4096
REPLACEMENT_CHARACTER = 0xFFFD
# The shared sampling loop's inputs: prompt, max_new_tokens, temperature, top_k, top_p, seed (one
# per row, checked by the signatures) and stop strings (B, S).
DECODE_INPUTS = [tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.int32),
                 tf.TensorSpec([None], tf.float32), tf.TensorSpec([None], tf.int32),
                 tf.TensorSpec([None], tf.float32), tf.TensorSpec([None], tf.int32),
                 tf.TensorSpec([None, None], tf.string)]


class LanguageModelServer:
    """Tokenization, the context window, cached decoding and the signatures of one model."""

    def __init__(self, model, context_length: int,
                 max_new_tokens_limit: int = DEFAULT_MAX_NEW_TOKENS_LIMIT, *, tokenizer):
        """tokenizer: the components.tokenizer Tokenizer the model was trained with. Bytes use
        stock TensorFlow ops; SentencePiece its in-graph ops (tensorflow-text)."""
        self.model = model
        self.tokenizer = tokenizer
        self.graph_tokenizer = None if tokenizer.kind == "bytes" else tokenizer.in_graph()
        self.vocab_size, self.pad_id = tokenizer.vocab_size, tokenizer.pad_id
        self.bos_id, self.eos_id = tokenizer.bos_id, tokenizer.eos_id
        pieces = stops.piece_bytes(tokenizer)
        self.context_length = context_length
        self.slides = decoding.can_slide(model)
        # Ids a full row keeps: gpt2 re-fills from the last half window, a rotary model drops one.
        self.keep = context_length - 1 if self.slides else max(1, context_length // 2)
        if self.slides and context_length + max_new_tokens_limit > MAX_ROTARY_POSITION:
            raise ValueError(f"export.max_new_tokens={max_new_tokens_limit} plus the context "
                             f"({context_length}) must be at most {MAX_ROTARY_POSITION}: positions "
                             f"past that lose rotary precision")
        self.max_new_tokens_limit = max_new_tokens_limit
        self.pieces = tf.constant(pieces)
        self.longest_piece = max(1, max(len(p) for p in pieces))
        self._decoders = {}   # cached -> the sampling loop's tf.function (_sampling_decode)
        # The model's forward pass as one tf.function, which every signature that needs whole
        # logits calls (_logits): an export traces it once, not once per signature.
        self._forward = tf.function(
            lambda ids: tf.cast(self.model(ids, training=False), tf.float32),
            input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)

    # -- tokenization and windows ---------------------------------------------------------------
    def _ids(self, strings):
        """string[B] -> ragged int32[B, None]: the tokenizer's ids (UTF-8 bytes: one per byte)."""
        if self.graph_tokenizer is not None:
            return tf.cast(self.graph_tokenizer.tokenize(strings), tf.int32)
        chars = tf.strings.bytes_split(strings)
        return tf.ragged.map_flat_values(
            lambda c: tf.cast(tf.reshape(tf.io.decode_raw(c, tf.uint8), [-1]), tf.int32), chars)

    def _encode(self, prompts):
        """string[B] -> ragged int32[B, None]: [BOS] + the prompt's ids. A byte prompt is first cut
        to its last `context` bytes (all the window can hold), so a 4 MB prompt is never split."""
        if self.graph_tokenizer is None:
            length = tf.strings.length(prompts)
            start = tf.maximum(length - self.context_length, 0)
            prompts = tf.strings.substr(prompts, start, length - start)
        bos = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(prompts)[0], 1], self.bos_id))
        return tf.concat([bos, self._ids(prompts)], axis=1)

    def _last_window(self, ids):
        """ragged [B, None] -> (int32[B, T] right-padded last T ids, int32[B] lengths <= T). The
        rows are cut to T before they are densified: memory is B x T, whatever the prompts."""
        limits = ids.row_limits()
        starts = tf.maximum(ids.row_starts(), limits - self.context_length)
        cut = tf.gather(ids.flat_values, tf.ragged.range(starts, limits))
        dense = cut.to_tensor(default_value=self.pad_id)
        dense = tf.pad(dense, [[0, 0], [0, self.context_length - tf.shape(dense)[1]]],
                       constant_values=self.pad_id)
        return dense, tf.cast(limits - starts, tf.int32)

    def _logits(self, ids):
        """ids int32 (B, T <= context) -> float32 logits (B, T, V). One tf.function that
        token_logits, serving_default, score and the uncached decoder call: an export traces the
        model's forward pass once for all of them, not once per signature, and saves one copy."""
        return self._forward(ids)

    def _next_logits(self, window, lengths):
        # Causal attention: right padding cannot change the logits at position length - 1.
        return tf.gather(self._logits(window), lengths - 1, batch_dims=1)   # (B, V)

    # -- decoding -------------------------------------------------------------------------------
    def _slide(self, window, lengths, positions, done, cache, cached):
        """Rows still decoding whose window is full keep their last `keep` ids. gpt2: positions
        restart at 0 and only those rows' cache is re-filled. Rotary: those rows' cache slides one
        slot and their positions keep counting. Ended rows never slide (nothing reads them)."""
        if self.slides and not cached:
            return window, lengths, positions, cache      # the history holds every id: never full
        slots, keep = self.context_length, self.keep
        full = (lengths >= slots) & tf.logical_not(done)
        shifted_pad = tf.fill([tf.shape(window)[0], slots - keep], self.pad_id)
        window = tf.where(full[:, None], tf.concat([window[:, slots - keep:], shifted_pad], 1), window)
        lengths = tf.where(full, keep, lengths)
        if not self.slides:
            positions = lengths
        if cached:
            make_room = (lambda: decoding.slide(cache, full)) if self.slides else (
                lambda: decoding.refill_rows(self.model, window, lengths, full, cache))
            cache = tf.cond(tf.reduce_any(full), make_room, lambda: cache)
        return window, lengths, positions, cache

    def _advance(self, token, window, lengths, positions, done, cache, cached):
        """Append token at each row's length (its cache slot) with its position; the next logits
        (ended rows skip the forward pass)."""
        window = tf.where(tf.one_hot(lengths, tf.shape(window)[1], on_value=True, off_value=False),
                          token[:, None], window)
        if not cached:
            return window, self._uncached_logits(window, lengths + 1), cache
        logits, cache = tf.cond(
            tf.reduce_any(done),
            lambda: decoding.step_rows(self.model, token, positions, cache, tf.logical_not(done),
                                       slot=lengths),
            lambda: decoding.step(self.model, token, positions, cache, slot=lengths))
        return window, logits, cache

    def _uncached_logits(self, window, lengths):
        """The no-cache decoder (tests, benchmarks/generate_speed.py): next-token logits computed
        from the ids alone, by the definition the cache must equal. gpt2: the model over the
        (B, T) window. Rotary: sliding-window attention over the whole (B, T + steps) history
        (decoding.sliding_window_logits), what a sliding cache computes; chosen over refusing
        cached=False for rotary models because it is one masked forward pass per token and keeps
        the cached path's twin for every batch shape. Ended rows' lengths run on past the width:
        their logits are never read, so their index is clamped."""
        lengths = tf.minimum(lengths, tf.shape(window)[1])
        if not self.slides:
            return self._next_logits(window, lengths)
        logits = decoding.sliding_window_logits(self.model, window, self.context_length)
        return tf.gather(logits, lengths - 1, batch_dims=1)

    def decode(self, prompts, max_new_tokens, choose, cached: bool = True, stop=None):
        """prompts string[B], max_new_tokens int32[B], choose(logits (B, V), i) -> int32[B], stop
        string[B, S] ("" entries = none) or None. Returns (text_bytes string[B], new_tokens
        int32[B]). Rows stop at EOS, after a stop string, or at their own limit. Per row, lengths
        = ids in the window (= cache slots filled), positions = the next id's position."""
        batch = tf.shape(prompts)[0]
        window, lengths = self._last_window(self._encode(prompts))      # (B, T), (B,)
        steps = tf.reduce_max(tf.concat([max_new_tokens, [0]], 0))
        if cached:
            logits, cache = decoding.prefill(self.model, window, lengths)
        else:
            if self.slides:                                             # (B, T + steps) history
                window = tf.pad(window, [[0, 0], [0, steps]], constant_values=self.pad_id)
            logits, cache = self._uncached_logits(window, lengths), ()
        stop = tf.zeros([batch, 0], tf.string) if stop is None else stop

        def body(i, window, lengths, positions, cache, logits, done, text, out):
            token = choose(logits, i)                                   # (B,)
            active = tf.logical_and(tf.logical_not(done), i < max_new_tokens)
            out = out.write(i + 1, tf.where(active, token, self.pad_id))
            piece = tf.where(active, tf.gather(self.pieces, token), "")
            text = tf.strings.join([text, piece])
            ended = stops.stopped(text, tf.strings.length(piece), stop, self.longest_piece)
            done = tf.logical_not(active) | tf.equal(token, self.eos_id) | ended
            window, lengths, positions, cache = self._slide(window, lengths, positions, done, cache, cached)
            window, logits, cache = self._advance(token, window, lengths, positions, done, cache, cached)
            return i + 1, window, lengths + 1, positions + 1, cache, logits, done, text, out

        def cond(i, window, lengths, positions, cache, logits, done, text, out):
            return tf.logical_and(i < steps, tf.logical_not(tf.reduce_all(done)))

        # Row 0 is a PAD column: stacking an empty TensorArray (0 steps) is an error.
        out = tf.TensorArray(tf.int32, size=1, dynamic_size=True, element_shape=[None]).write(
            0, tf.fill([batch], self.pad_id))
        loop = tf.while_loop(cond, body, [tf.constant(0), window, lengths, lengths, cache, logits,
                                          tf.zeros([batch], tf.bool), tf.fill([batch], ""), out])
        new = tf.transpose(tf.reshape(loop[-1].stack(), [-1, batch]))   # (B, steps run)
        return self._decoded(new, loop[-2])

    def _decoded(self, new, text):
        """(text_bytes string[B], new_tokens int32[B]) from the new ids (B, steps) and the bytes
        the loop appended; pad, bos and eos add no text and are not counted as new tokens."""
        if self.graph_tokenizer is None:
            return text, tf.reduce_sum(tf.cast(new < 256, tf.int32), axis=1)
        text = self.graph_tokenizer.detokenize(tf.RaggedTensor.from_tensor(new))
        special = tf.logical_or(tf.equal(new, self.pad_id),
                                tf.logical_or(tf.equal(new, self.bos_id), tf.equal(new, self.eos_id)))
        return text, tf.reduce_sum(tf.cast(tf.logical_not(special), tf.int32), axis=1)

    def _text_outputs(self, text_bytes, new_tokens):
        text = tf.strings.unicode_transcode(text_bytes, "UTF-8", "UTF-8", errors="replace",
                                            replacement_char=REPLACEMENT_CHARACTER)
        return {"text": text, "text_bytes": text_bytes, "new_tokens": new_tokens}

    # -- signatures -----------------------------------------------------------------------------
    def token_logits(self, input_ids):
        """Already tokenized ids (B, T <= context) -> logits (B, T, vocab): what the Evaluator
        measures, through the same graph and weights that serving uses."""
        checks = [tf.debugging.assert_less_equal(tf.shape(input_ids)[1], self.context_length,
                                                 message=f"input_ids: at most {self.context_length} positions"),
                  tf.debugging.assert_non_negative(input_ids, message="input_ids must be >= 0"),
                  tf.debugging.assert_less(input_ids, self.vocab_size, message=f"input_ids must be < {self.vocab_size}")]
        with tf.control_dependencies(checks):
            return {"logits": self._logits(input_ids)}

    def serving_default(self, prompt):
        window, lengths = self._last_window(self._encode(prompt))
        return {"logits": self._next_logits(window, lengths), "prompt_tokens": lengths}

    def _never(self, logits):  # PAD and BOS are never a continuation
        return decoding.ban(logits, tf.constant([self.pad_id, self.bos_id], tf.int32))

    def generate(self, prompt, max_new_tokens, cached: bool = True):
        """Greedy: the sampling loop with every row's temperature 0 (its draw then never runs)."""
        batch = tf.shape(prompt)[0]
        limit = inputs.checked_max_new_tokens(max_new_tokens, batch, self.max_new_tokens_limit)
        greedy = (tf.zeros([batch], tf.float32), tf.zeros([batch], tf.int32),
                  tf.ones([batch], tf.float32), tf.zeros([batch], tf.int32))
        return self._text_outputs(*self._sampling_decode(cached)(
            prompt, limit, *greedy, tf.zeros([batch, 0], tf.string)))

    def sample(self, prompt, max_new_tokens, temperature, top_k, top_p, seed, stop, cached: bool = True):
        batch = tf.shape(prompt)[0]
        limit = inputs.checked_max_new_tokens(max_new_tokens, batch, self.max_new_tokens_limit)
        temperature, top_k, top_p, seed = inputs.sampling_inputs(batch, temperature, top_k, top_p, seed)
        return self._text_outputs(*self._sampling_decode(cached)(
            prompt, limit, temperature, top_k, top_p, seed, stops.stop_strings(stop, batch)))

    def _sampling_decode(self, cached: bool):
        """decode with _sampler's choice as one tf.function (per `cached`), which generate and
        sample both call: an export traces the loop (prefill, step, refill: the model 4-5 times)
        once instead of once per signature. Measured 2026-11-28 on a 2 x 64 llama: the two loops
        were half of an export, 2.7 of 5.5 s (float) and 5.0 of 11.4 s (int8)."""
        if cached not in self._decoders:
            def loop(prompt, limit, temperature, top_k, top_p, seed, stop):
                return self.decode(prompt, limit, self._sampler(temperature, top_k, top_p, seed),
                                   cached, stop)
            self._decoders[cached] = tf.function(loop, input_signature=DECODE_INPUTS,
                                                 autograph=False)
        return self._decoders[cached]

    def _sampler(self, temperature, top_k, top_p, seed):
        """choose(logits (B, V), i) -> int32[B]: the greedy id of each row whose temperature is 0,
        a draw for the others; no draw at all when no row samples (a greedy request's cost)."""
        def draw(logits, i):
            scaled = decoding.top_k_top_p(logits / tf.maximum(temperature, 1e-6)[:, None], top_k, top_p)
            # Gumbel-max with a per-row stateless stream (seed, step): a row's text depends on its
            # own prompt and seed only, not on the other requests TF Serving batched with it.
            uniform = tf.map_fn(
                lambda s: tf.random.stateless_uniform([self.vocab_size], seed=tf.stack([s, i]),
                                                      minval=1e-20, maxval=1.0),
                seed, fn_output_signature=tf.float32)                    # (B, V)
            return tf.argmax(scaled - tf.math.log(-tf.math.log(uniform)), axis=-1, output_type=tf.int32)

        def choose(logits, i):
            logits = self._never(logits)                                 # -inf: any temperature
            greedy = tf.argmax(logits, axis=-1, output_type=tf.int32)
            sampling = temperature > 0
            return tf.cond(tf.reduce_any(sampling),
                           lambda: tf.where(sampling, draw(logits, i), greedy), lambda: greedy)
        return choose

    def score(self, prompt, continuation):
        """Sum of log p(continuation token | everything before it) over the continuation's tokens,
        with the prompt cut from the left so that [prompt; continuation] fits the window."""
        tokens = tf.cast(self._ids(continuation).row_lengths(), tf.int32)
        tokens = inputs.checked(tokens, tokens <= self.context_length - 1,
                                f"continuation must be at most {self.context_length - 1} tokens "
                                f"(the context window less one)")
        prompt = inputs.checked(prompt, tf.equal(tf.size(continuation), tf.size(prompt)),
                                "continuation must have one value per prompt")
        ids = tf.concat([self._encode(prompt), self._ids(continuation)], axis=1)
        window, lengths = self._last_window(ids)
        log_probs = tf.nn.log_softmax(self._logits(window))
        per_position = tf.gather(log_probs[:, :-1], window[:, 1:], batch_dims=2)   # (B, T-1): id j+1
        position = tf.range(1, self.context_length)[None]
        scored = (position >= (lengths - tokens)[:, None]) & (position < lengths[:, None])
        return {"log_prob": tf.reduce_sum(tf.where(scored, per_position, 0.0), axis=1), "tokens": tokens}
