"""What ``serve`` checks of a request before transformers' handlers hand it to the model,
and the answers it gives instead: OpenAI's error body (``{"error": {"message", "type",
"param", "code"}}``, status 400) and OpenAI's model list.

Why: transformers' handlers pass a request's fields to ``generate`` or to the continuous
batching worker as they come. A prompt that tokenizes to no tokens, ``max_tokens: 0``, a
string where a number belongs... fail inside the model or ``generate``: a 500 and a
traceback. Under continuous batching it is worse: an empty prompt, or a request longer
than the paged KV cache holds, kills the worker thread, and every later request gets 503
until the server is restarted.

Two stages, both before the model runs:
- the JSON body (``check_body``): the model id, field types and ranges, chat messages;
- the tokenized prompt (``fit_new_tokens``, called by ``CheckedManager``, which wraps
  transformers' generation manager: the one place the sequential and the continuous
  batching path share): at least one token, and prompt + max_tokens within the model's
  context and, under continuous batching, within what the paged cache holds for one
  request. A request without max_tokens gets what fits (transformers' default, 1024 new
  tokens, is more than many contexts hold).

Nothing here imports torch, transformers or fastapi at module level: ``serve`` builds the
classes from transformers' own when it starts.
"""
from __future__ import annotations

import contextvars
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

OWNER = "rvv_inductor"
# The continuous batching worker builds its paged cache in its own thread once the first
# request starts it; that request waits for the cache (blocking the event loop, once: the
# first request cannot run before the cache exists anyway) to know its size.
CB_CACHE_WAIT_S = 60.0


class RequestError(Exception):
    """A request the server refuses, with OpenAI's ``invalid_request_error`` body."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None, status: int = 400):
        super().__init__(message)
        self.message, self.param, self.code, self.status = message, param, code, status


def error_body(message: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def context_tokens(config) -> int | None:
    """Positions the model was built for (prompt and completion together)."""
    n = getattr(config, "max_position_embeddings", None)
    return n if isinstance(n, int) and n > 0 else None


@dataclass(frozen=True)
class Served:
    """The one model this server serves: what /v1/models lists and requests may name."""

    model_id: str  # the id transformers pins (the resolved path); responses name it
    aliases: frozenset  # the path as the user typed it, accepted as `model` too
    created: int
    vocab_size: int | None

    @classmethod
    def of(cls, model_id: str, typed: str, config) -> Served:
        return cls(model_id=model_id, aliases=frozenset({typed}), created=int(Path(model_id).stat().st_mtime),
                   vocab_size=getattr(config, "vocab_size", None))

    def card(self) -> dict:
        return {"id": self.model_id, "object": "model", "created": self.created, "owned_by": OWNER}


# ----------------------------------------------------------------------------- the JSON body
def _show(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bad(name: str, what: str, value, param: str | None = None):
    raise RequestError(f"{name} must be {what}; got {_show(value)}.", param=param or name)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def integer(lo: int, hi: int | None = None):
    def check(name, value, _served):
        if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
            _bad(name, f"an integer >= {lo}" if hi is None else f"an integer from {lo} to {hi}", value)
    return check


def number(lo: float, hi: float, lo_open: bool = False, why: str = ""):
    def check(name, value, _served):
        if not _is_number(value) or value > hi or value < lo or (lo_open and value == lo):
            _bad(name, f"a number {'greater than' if lo_open else 'from'} {lo} {'and at most' if lo_open else 'to'} "
                       f"{hi}{why}", value)
    return check


def _of_type(kind: type, what: str):
    def check(name, value, _served):
        if not isinstance(value, kind):
            _bad(name, what, value)
    return check


boolean = _of_type(bool, "true or false")
string = _of_type(str, "a string")
json_object = _of_type(dict, "a JSON object")


def prompt_text(name, value, _served):
    if not isinstance(value, str):
        _bad(name, "a string (prompts of token ids are not supported)", value)


def response_input(name, value, _served):
    # An empty list renders no message: the chat template fails on it.
    if not (isinstance(value, str) or (isinstance(value, list) and value)):
        _bad(name, "a string or a non-empty list of input items", value)


def stop(name, value, _served):
    if isinstance(value, str):
        value = [value]
    if not (isinstance(value, list) and value and all(isinstance(s, str) and s for s in value)):
        _bad(name, "a non-empty string or a list of them", value)


def generation_config(name, value, _served):
    """transformers' own extension: a GenerationConfig as JSON text."""
    try:
        fields = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        fields = None
    if not isinstance(fields, dict):
        _bad(name, "a JSON object in a string", value)
    from transformers import GenerationConfig  # lazy: transformers; this module must import without it (host)

    try:
        GenerationConfig(**fields)
    except (TypeError, ValueError) as e:
        _bad(name, f"a GenerationConfig transformers accepts ({e})", value)


def logit_bias(name, value, served):
    if not isinstance(value, dict):
        _bad(name, "a JSON object mapping token ids to biases", value)
    vocab = served.vocab_size
    for key, bias in value.items():
        if not (key.isdecimal() and (vocab is None or int(key) < vocab)):
            _bad(f"{name} key {key!r}", f"a token id from 0 to {vocab - 1}" if vocab else "a token id", key, param=name)
        if not (_is_number(bias) and -100 <= bias <= 100):
            _bad(f"{name}[{key!r}]", "a number from -100 to 100", bias, param=name)


_TEXT_PARTS = ("text", "input_text", "output_text")


def _message(where: str, m) -> None:
    if not isinstance(m, dict):
        _bad(where, "an object with role and content", m, param="messages")
    if not isinstance(m.get("role"), str):
        _bad(f"{where}.role", "a string", m.get("role"), param="messages")
    content = m.get("content")
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        _bad(f"{where}.content", "a string, a list of content parts or null", content, param="messages")
    for j, part in enumerate(content):
        if not (isinstance(part, dict) and isinstance(part.get("type"), str)):
            _bad(f"{where}.content[{j}]", "an object with a type", part, param="messages")
        if part["type"] in _TEXT_PARTS and not isinstance(part.get("text"), str):
            _bad(f"{where}.content[{j}].text", "a string", part.get("text"), param="messages")


def messages(name, value, _served):
    if not (isinstance(value, list) and value):  # no message: the chat template fails
        _bad(name, "a non-empty list of messages", value)
    for i, m in enumerate(value):
        _message(f"{name}[{i}]", m)


@dataclass(frozen=True)
class Endpoint:
    prompt: str  # the field the prompt comes from
    max_tokens: str  # the field limiting the completion
    required: tuple
    fields: dict  # field -> check(name, value, served), for fields present and not null


_SAMPLING = {"temperature": number(0, 2), "top_p": number(0, 1), "seed": integer(-2**63, 2**64 - 1),
             "stream": boolean, "generation_config": generation_config}
# transformers applies frequency_penalty as a repetition penalty of 1 + frequency_penalty,
# which must be positive.
_PENALTY = number(-1, 2, lo_open=True, why=" (it is applied as a repetition penalty of 1 + frequency_penalty)")

ENDPOINTS = {
    "completions": Endpoint("prompt", "max_tokens", (), {
        **_SAMPLING, "prompt": prompt_text, "suffix": string, "stop": stop, "frequency_penalty": _PENALTY,
        "max_tokens": integer(1)}),
    "chat": Endpoint("messages", "max_tokens", ("messages",), {
        **_SAMPLING, "messages": messages, "stop": stop, "frequency_penalty": _PENALTY, "logit_bias": logit_bias,
        "chat_template_kwargs": json_object, "max_tokens": integer(1)}),
    "responses": Endpoint("input", "max_output_tokens", ("input",), {
        **_SAMPLING, "input": response_input, "chat_template_kwargs": json_object, "max_output_tokens": integer(1)}),
}


@dataclass(frozen=True)
class RequestFacts:
    """What the token check needs to know of the body."""

    prompt_param: str | None = None
    max_param: str | None = None
    max_given: bool = True  # False: the server picks the completion's length


def _check_model(body: dict, served: Served) -> None:
    requested = body.get("model")
    if requested is None or requested == served.model_id:
        return
    if isinstance(requested, str) and requested in served.aliases:
        body["model"] = served.model_id  # transformers compares with the id it pinned
        return
    raise RequestError(f"model {_show(requested)} is not served here; this server serves {served.model_id!r} "
                       "(GET /v1/models lists it).", param="model", code="model_not_found")


def check_body(endpoint: Endpoint, body: dict, served: Served) -> RequestFacts:
    """Raises RequestError for the first field that would fail later; normalizes what
    transformers would reject although OpenAI allows it (integer logit biases)."""
    _check_model(body, served)
    for name in endpoint.required:
        if body.get(name) is None:
            raise RequestError(f"{name} is required.", param=name, code="missing_required_parameter")
    for name, check in endpoint.fields.items():
        if body.get(name) is not None:
            check(name, body[name], served)
    if body.get("logit_bias") is not None:
        # transformers' sequence bias takes floats only; OpenAI's own examples send integers.
        body["logit_bias"] = {k: float(v) for k, v in body["logit_bias"].items()}
    # A generation_config sets its own length: as asked for.
    given = body.get(endpoint.max_tokens) is not None or body.get("generation_config") is not None
    return RequestFacts(endpoint.prompt, endpoint.max_tokens, given)


# ----------------------------------------------------------------------------- the tokens
@dataclass(frozen=True)
class Limit:
    tokens: int  # prompt and completion together
    what: str


def fit_new_tokens(n_prompt: int, n_new: int | None, limits: list, req: RequestFacts) -> int | None:
    """The completion length to generate, or RequestError: no prompt token, or more tokens
    than the tightest limit allows (a completion without max_tokens is cut to fit)."""
    param = req.prompt_param or "prompt"
    if n_prompt == 0:
        raise RequestError(f"{param} is empty after tokenization: the model needs at least one token to continue "
                           "from.", param=param, code="empty_prompt")
    if not limits:
        return n_new
    limit = min(limits, key=lambda lim: lim.tokens)
    room = limit.tokens - n_prompt
    if room < 1:
        raise RequestError(f"{param} is {n_prompt} tokens; {limit.what} holds {limit.tokens} tokens, prompt and "
                           "completion together: no room for a completion.", param=param,
                           code="context_length_exceeded")
    if n_new is None or n_new <= room:
        return n_new
    if not req.max_given:
        return room
    name = req.max_param or "max_tokens"
    raise RequestError(f"{n_prompt} prompt tokens + {name} {n_new} = {n_prompt + n_new} tokens; {limit.what} "
                       f"holds {limit.tokens}: ask for at most {room}.", param=name, code="context_length_exceeded")


# The body's facts reach CheckedManager through transformers' code, which passes on the
# tokenized prompt only: a context variable of the request's task carries them.
_REQUEST: contextvars.ContextVar = contextvars.ContextVar("rvv_inductor_serve_request", default=None)


def _paged_cache(manager):
    """The continuous batching worker's paged KV cache, or None if it is not there."""
    t_end = time.monotonic() + CB_CACHE_WAIT_S
    while True:
        try:
            return manager.scheduler.cache
        except RuntimeError:  # the worker has not built it yet
            if not manager.is_alive() or time.monotonic() > t_end:
                return None
            time.sleep(0.01)


def cache_limit(cache) -> Limit:
    """What the paged cache holds for one request. The scheduler allocates a block ahead
    when it needs one (a request of T tokens may hold floor(T / block) + 1 blocks), and one
    request that does not fit stops the worker: hence all blocks but one token."""
    blocks = cache.num_blocks // max(getattr(cache, "num_groups", 1), 1)  # each layer group takes its own blocks
    return Limit(blocks * cache.block_size - 1,
                 f"the paged KV cache ({blocks} blocks of {cache.block_size} tokens per request, less one token)")


class CheckedManager:
    """transformers' generation manager (sequential or continuous batching), with the
    tokenized prompt checked before it reaches the model."""

    def __init__(self, inner, continuous_batching: bool) -> None:
        self._inner, self._cb = inner, continuous_batching

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def generate_streaming(self, model, processor, inputs, gen_config, *args, **kwargs):
        self._fit(model, inputs, gen_config)
        return self._inner.generate_streaming(model, processor, inputs, gen_config, *args, **kwargs)

    async def generate_non_streaming(self, model, processor, inputs, gen_config, *args, **kwargs):
        self._fit(model, inputs, gen_config)
        return await self._inner.generate_non_streaming(model, processor, inputs, gen_config, *args, **kwargs)

    def _fit(self, model, inputs, gen_config) -> None:
        ids = inputs["input_ids"]
        n_prompt = len(ids) if isinstance(ids, list) else int(ids.shape[-1])  # CB: a list; sequential: [1, n]
        limits = []
        n_ctx = context_tokens(model.config)
        if n_ctx:
            limits.append(Limit(n_ctx, "the model's context (max_position_embeddings)"))
        cache = _paged_cache(self._inner) if self._cb else None
        if cache is not None:
            limits.append(cache_limit(cache))
        # Handlers other than ours set no facts: a length they pass counts as asked for.
        req = _REQUEST.get() or RequestFacts()
        gen_config.max_new_tokens = fit_new_tokens(n_prompt, gen_config.max_new_tokens, limits, req)


def checked_generation_state(base: type) -> type:
    """transformers' GenerationState handing out CheckedManagers."""

    class CheckedGenerationState(base):
        def get_manager(self, model_id: str, use_cb: bool = False):
            return CheckedManager(super().get_manager(model_id, use_cb=use_cb), use_cb)

    return CheckedGenerationState


def checked_handler(base: type, endpoint: str) -> type:
    """transformers' handler of one endpoint, checking the body first and answering every
    refusal (ours and transformers' own HTTPException) with OpenAI's error body."""
    spec = ENDPOINTS[endpoint]

    class Checked(base):
        async def handle_request(self, body: dict, request_id: str):
            # lazy: transformers' server stack, there only when serving; this module must import without it
            from fastapi.responses import JSONResponse
            from starlette.exceptions import HTTPException

            try:
                token = _REQUEST.set(check_body(spec, body, self.model_manager.served))
                try:
                    return await super().handle_request(body, request_id)
                finally:
                    _REQUEST.reset(token)
            except RequestError as e:
                return JSONResponse(error_body(e.message, e.param, e.code), status_code=e.status)
            except HTTPException as e:
                return JSONResponse(error_body(str(e.detail)), status_code=e.status_code)

    Checked.__name__ = Checked.__qualname__ = f"Checked{base.__name__}"
    return Checked
