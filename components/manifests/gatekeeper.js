// The gatekeeper's request checks and reply bounds, run by nginx's njs module (njs 0.7.9 in
// Debian 12, which the rehearsal runs; 1.0.1 in the pod's nginx image). Plain ES5 plus
// `r.requestText`, `r.headersOut`, `r.internalRedirect`, `r.subrequest`, `r.sendBuffer` and
// `js_var`, which both versions have.
// The LIMITS line above this comment is written by components/manifests/gatekeeper.py from the plan.

// Request fields that make vLLM compile a grammar (vLLM 0.31 entrypoints/openai protocol:
// response_format, structured_outputs; tools become a JSON schema when tool_choice asks for one;
// the guided_* names are older spellings some clients still send). A `response_format` of type
// "text" compiles nothing.
var SCHEMA_FIELDS = [
    'response_format', 'structured_outputs', 'tools', 'structural_tag',
    'guided_json', 'guided_regex', 'guided_choice', 'guided_grammar'
];

function error(r, status, type, message, param) {
    r.headersOut['Content-Type'] = 'application/json';
    r.return(status, JSON.stringify({
        error: {message: message, type: type, param: param || null, code: status}
    }) + '\n');
}

function refuse(r, param, message) {
    error(r, 400, 'invalid_request_error', message, param);
}

// A numeric field as vLLM's pydantic models would read it in lax mode ("4" and 4.0 are 4).
function amount(value) {
    if (value === undefined || value === null) {
        return null;
    }
    if (typeof value === 'boolean') {
        return value ? 1 : 0;
    }
    return Number(value);
}

// How many prompts a completion's `prompt` holds: a string or a list of token ids is one.
function prompts(value) {
    if (!Array.isArray(value) || value.length === 0) {
        return 1;
    }
    for (var i = 0; i < value.length; i++) {
        if (typeof value[i] !== 'number') {
            return value.length;
        }
    }
    return 1;
}

function sequenceProblem(body, completion) {
    var n = amount(body.n);
    var bestOf = amount(body.best_of);
    if (isNaN(n) || isNaN(bestOf)) {
        return [isNaN(n) ? 'n' : 'best_of', 'must be a whole number'];
    }
    var each = Math.max(n === null ? 1 : n, bestOf === null ? 1 : bestOf);
    var count = completion ? prompts(body.prompt) : 1;
    if (count * each <= LIMITS.maxSequences) {
        return null;
    }
    var field = count > 1 ? 'prompt' : (bestOf !== null && bestOf > n ? 'best_of' : 'n');
    return [field, '`' + field + '` asks for ' + count * each + ' sequences in one request; ' +
        'this endpoint serves at most ' + LIMITS.maxSequences + ' per request'];
}

function logprobProblem(body, completion) {
    if (body.echo) {
        return ['echo', '`echo` is not served here: the reply would repeat the prompt'];
    }
    var asked = [];
    if (completion) {
        asked.push(['logprobs', body.logprobs === false ? null : amount(body.logprobs)]);
    } else if (body.logprobs) {
        var top = amount(body.top_logprobs);
        asked.push(['top_logprobs', top === null ? 0 : top]);
    }
    asked.push(['prompt_logprobs', amount(body.prompt_logprobs)]);
    // vLLM 0.31 returns a log-probability per listed id at every position, up to 128 ids, and
    // checks the list against no --max-logprobs (sampling_params.py `_validate_logprobs`), even
    // beside `logprobs: false` (completion/serving.py): the ids count as many as they list.
    var ids = body.logprob_token_ids;
    asked.push(['logprob_token_ids', Array.isArray(ids) ? ids.length || null : amount(ids)]);
    for (var i = 0; i < asked.length; i++) {
        var value = asked[i][1];
        if (value === null) {
            continue;
        }
        if (LIMITS.maxLogprobs === 0 || isNaN(value) || value > LIMITS.maxLogprobs) {
            var field = asked[i][0] === 'top_logprobs' ? 'logprobs' : asked[i][0];
            return [field, LIMITS.maxLogprobs === 0
                ? '`' + field + '` is not served here: log-probabilities multiply the reply'
                : '`' + asked[i][0] + '` may be at most ' + LIMITS.maxLogprobs];
        }
    }
    return null;
}

// The bytes of grammar input a request carries (0: none).
function schemaBytes(body) {
    var total = 0;
    for (var i = 0; i < SCHEMA_FIELDS.length; i++) {
        var value = body[SCHEMA_FIELDS[i]];
        if (value === undefined || value === null) {
            continue;
        }
        if (SCHEMA_FIELDS[i] === 'response_format' && value.type === 'text') {
            continue;
        }
        total += JSON.stringify(value).length;
    }
    return total;
}

// Counts xgrammar unrolls, so their compile cost follows the number, not its bytes
// (infra/plan/frontdoor.py SCHEMA_LENGTH_UNIT_S): a JSON schema's length and size keywords, and a
// regex's counted repetition in a `pattern`, `patternProperties` key, regex or grammar. Each is
// bounded alone, and all of a request's together take at most one compile budget: a keyword's
// count is 1/maxSchemaCounts[0] of it (of a min and max pair, the larger), a regex's unit
// 1/maxSchemaCounts[1]. A schema or tag sent as a JSON string is read and walked the same way.
var COUNT_KEY = /^(max|min)(Length|Items|Properties)$/;
var REGEX_KEY = /^(pattern|regex|grammar|guided_regex|guided_grammar|whitespace_pattern)$/;
var JSON_KEY = /^(json|guided_json|structural_tag|schema)$/;
var COUNTED = /^\{\s*(\d*)\s*(?:,\s*(\d*)\s*)?\}/;

// The end of the character class opening at `i` (a `]` first in it is a literal).
function classEnd(text, i) {
    var j = i + 1;
    if (text[j] === '^') {
        j++;
    }
    if (text[j] === ']') {
        j++;
    }
    while (j < text.length && text[j] !== ']') {
        j += text[j] === '\\' ? 2 : 1;
    }
    return j + 1;
}

// A regex's units: each counted repetition's count times what it repeats (a group's own units,
// at least 1), so nested counts multiply; `{,n}` counts n.
function repeatUnits(text) {
    var stack = [0], last = 0, i = 0;
    while (i < text.length) {
        var c = text[i], m = c === '{' ? COUNTED.exec(text.slice(i)) : null;
        if (m && (m[1] || m[2])) {
            var n = Math.max(Number(m[1] || 0), Number(m[2] || 0));
            stack[stack.length - 1] += n * Math.max(1, last) - last;
            last = 0;
            i += m[0].length;
            continue;
        }
        last = 0;
        if (c === '\\') {
            i += 2;
        } else if (c === '[') {
            i = classEnd(text, i);
        } else if (c === '(') {
            stack.push(0);
            i++;
        } else if (c === ')' && stack.length > 1) {
            last = stack.pop();
            stack[stack.length - 1] += last;
            i++;
        } else {
            i++;
        }
    }
    return stack.reduce(function (a, b) { return a + b; }, 0);
}

// The first count in grammar input above its bound, or the field where all of them pass one
// compile budget, as [field, message], or null: one walk over the grammar fields only, after the
// byte bound (at most maxSchemaBytes, nested at most maxJsonDepth).
function countProblem(body) {
    var bound = LIMITS.maxSchemaCounts[0], regexBound = LIMITS.maxSchemaCounts[1], path = [];
    var budget = 0;
    function at() {
        return '`' + path.join('.') + '`';
    }
    function regex(text) {
        var units = repeatUnits(text);
        budget += units / regexBound;
        return units > regexBound ? at() + ' repeats ' + units + ' times; ' +
            'a counted repetition may be at most ' + regexBound + ' here' : null;
    }
    function counts(value) {
        var most = {};
        Object.keys(value).forEach(function (k) {
            var m = COUNT_KEY.exec(k);
            if (m && typeof value[k] === 'number') {
                most[m[2]] = Math.max(most[m[2]] || 0, value[k]);
            }
        });
        Object.keys(most).forEach(function (k) { budget += most[k] / bound; });
    }
    function walk(value, key) {
        if (typeof value === 'number') {
            return COUNT_KEY.test(key) && value > bound ? at() + ' is ' + value +
                '; maxLength, minLength, maxItems, minItems, maxProperties and minProperties may ' +
                'be at most ' + bound + ' here' : null;
        }
        if (typeof value === 'string' && JSON_KEY.test(key)) {
            try {
                value = JSON.parse(value);
            } catch (e) {
                return at() + ' is a string that is not JSON';
            }
        }
        if (typeof value === 'string') {
            return REGEX_KEY.test(key) ? regex(value) : null;
        }
        if (typeof value !== 'object' || value === null) {
            return null;
        }
        counts(value);
        var keys = Object.keys(value);
        for (var i = 0; i < keys.length; i++) {
            path.push(keys[i]);
            var found = (key === 'patternProperties' && regex(keys[i])) ||
                walk(value[keys[i]], keys[i]);
            path.pop();
            if (found) {
                return found;
            }
        }
        return null;
    }
    for (var i = 0; i < SCHEMA_FIELDS.length; i++) {
        var field = SCHEMA_FIELDS[i], value = body[field];
        if (value === undefined || value === null ||
            (field === 'response_format' && value.type === 'text')) {
            continue;
        }
        path = [field];
        var message = walk(value, field);
        if (!message && budget > 1) {
            message = 'the counts of the grammar input up to `' + field + '` take ' +
                Math.round(budget * 100) + '% of one compile (a unit of a count takes ' +
                (100 / bound) + '%, of a counted repetition ' + (100 / regexBound) +
                '%); at most 100% here';
        }
        if (message) {
            return [field, message + ': vLLM compiles each unit of it, one grammar at a time'];
        }
    }
    return null;
}

// Body fields that steer vLLM's scheduling or a request's identity, refused like their header
// forms are dropped (vLLM 0.31 entrypoints/openai chat and completion request models):
// `request_id` names the request (and its logs and metrics), `priority` jumps the scheduler's
// queue, `cache_salt` shares or splits the prefix cache, `kv_transfer_params`
// and `ec_transfer_params` reach the KV and encoder-cache connectors, `vllm_xargs` plugins.
var STEERING_FIELDS = [
    'request_id', 'priority', 'cache_salt', 'kv_transfer_params', 'ec_transfer_params', 'vllm_xargs'
];

// What vLLM 0.31 reads from a body but cannot hand to its engine. vLLM registers a request in its
// output processor before it msgpack-encodes it for the engine core (v1/engine/async_llm.py
// `_add_request`, then `engine_core.add_request_async`), and `generate()` aborts only a request
// whose queue it already holds, so an encoding error leaves that registration behind for good.
// The encoder (v1/serial_utils.py `MsgpackEncoder`, msgspec) refuses two things JSON carries to
// it: a string holding an unpaired UTF-16 surrogate, which UTF-8 cannot write
// (UnicodeEncodeError; Python's json decodes "\ud800" escapes, and surrogates written as UTF-8
// bytes, into just that), and an integer outside 64 bits (OverflowError). Any field can reach the
// encoder (stop strings, bad words, schemas), so the whole body is checked, not a list of fields.
var SUSPECT = /\\u[dD][89a-fA-F]|\d{19}/;  // 2^63 has 19 digits
var SURROGATE_ESCAPE = /(\\+)u[dD]([89a-fA-F])[0-9a-fA-F]{2}/g;
var PAIRED_LOW = /^\\u[dD][c-fC-F][0-9a-fA-F]{2}/;
var INT64 = 9223372036854775808;  // 2^63: njs rounds 2^63 - 1 and 2^64 - 1 up to a power of two

// Whether `text` escapes a surrogate outside a pair (an escape: an odd run of backslashes).
function unpairedEscape(text) {
    var paired = -1, m;
    SURROGATE_ESCAPE.lastIndex = 0;
    while ((m = SURROGATE_ESCAPE.exec(text)) !== null) {
        if (m[1].length % 2 === 0) {
            continue;
        }
        var end = m.index + m[0].length;
        if ('89abAB'.indexOf(m[2]) >= 0) {
            if (!PAIRED_LOW.test(text.slice(end, end + 6))) {
                return true;
            }
            paired = end;
        } else if (m.index + m[1].length - 1 !== paired) {
            return true;
        }
    }
    return false;
}

// The first thing in `value` vLLM's engine cannot carry ('number' or 'surrogate'), or null. njs
// parses an unpaired escape into U+FFFD (njs_json.c), so once the text holds one, the string or
// key with U+FFFD names where it is.
function uncarried(value, surrogates) {
    if (typeof value === 'number') {
        return Math.abs(value) >= INT64 && Math.floor(value) === value ? 'number' : null;
    }
    if (typeof value === 'string') {
        return surrogates && value.indexOf('\uFFFD') >= 0 ? 'surrogate' : null;
    }
    if (value === null || typeof value !== 'object') {
        return null;
    }
    var keys = Object.keys(value);
    for (var i = 0; i < keys.length; i++) {
        var found = uncarried(keys[i], surrogates) || uncarried(value[keys[i]], surrogates);
        if (found) {
            return found;
        }
    }
    return null;
}

// [field, message] for a body vLLM could not carry, or null. Bodies that cannot hold such a
// thing (no surrogate escape, no run of 19 digits: nearly all) are not walked at all.
function carriageProblem(text, body) {
    if (!SUSPECT.test(text)) {
        return null;
    }
    var surrogates = unpairedEscape(text);
    var fields = Object.keys(body);
    for (var i = 0; i < fields.length; i++) {
        var found = uncarried(body[fields[i]], surrogates);
        if (found === 'number') {
            return [fields[i], '`' + fields[i] + '` holds a whole number of 2^63 or more in ' +
                'size; vLLM\'s engine carries integers of 64 bits at most'];
        }
        if (found) {
            return [fields[i], '`' + fields[i] + '` holds an unpaired UTF-16 surrogate escape ' +
                '(\\uD800-\\uDFFF without its other half), which vLLM cannot encode'];
        }
    }
    return surrogates ? [null, 'The request body holds an unpaired UTF-16 surrogate escape ' +
        '(\\uD800-\\uDFFF without its other half), which vLLM cannot encode'] : null;
}

// Whether the body is UTF-8 (JSON must be: RFC 8259 section 8.1). Python's json reads
// surrogates written as UTF-8 bytes ("surrogatepass"), which njs leaves as bytes.
function utf8(r) {
    try {
        new TextDecoder('utf-8', {fatal: true}).decode(r.requestBuffer);
        return true;
    } catch (e) {
        return false;
    }
}

// The most KV-cache tokens a request can hold in vLLM, at the large end, before vLLM sees it: its
// prompt's tokens are at most the body's bytes (the tokenizer gives each token at least one byte
// of text, and the chat template's own tokens are fewer than the JSON around each message), plus
// the longest reply it may ask for (the larger of `max_tokens` and `max_completion_tokens`,
// within the cap vLLM applies to all), and never more than the context, which no request exceeds.
function tokenEstimate(r, body) {
    var bytes = r.requestBuffer ? r.requestBuffer.length : (r.requestText || '').length;
    var asked = Math.max(amount(body.max_tokens) || 0, amount(body.max_completion_tokens) || 0);
    var reply = asked > 0 ? Math.min(asked, LIMITS.maxReplyTokens) : LIMITS.maxReplyTokens;
    return Math.min(LIMITS.maxModelLen, bytes + reply);
}

// The suffix of the location of a request's token tier ('' below the first threshold): the
// tier's location counts it in every tier up to its own (gatekeeper_conf.py `_token_zones`).
function tier(r, body) {
    if (!LIMITS.tokenTiers.length) {
        return '';
    }
    var tokens = tokenEstimate(r, body);
    var k = 0;
    for (var i = 0; i < LIMITS.tokenTiers.length; i++) {
        if (tokens > LIMITS.tokenTiers[i]) {
            k = i + 1;
        }
    }
    return k ? '_t' + k : '';
}

function inspect(r, target, completion) {
    var body;
    var text = r.requestText || '';
    try {
        body = JSON.parse(text);
    } catch (e) {
        // The parser's own verdict, with no second look at the text: njs refuses nesting past
        // its depth (njs_json.c NJS_JSON_MAX_DEPTH, "Nested too deep"); say so, rather than
        // calling well-formed JSON invalid.
        return refuse(r, null, String(e.message).indexOf('Nested too deep') >= 0
            ? 'The request body nests arrays and objects more than ' + LIMITS.maxJsonDepth +
              ' levels deep; this endpoint reads at most ' + LIMITS.maxJsonDepth
            : 'The request body is not valid JSON');
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
        return refuse(r, null, 'The request body must be a JSON object');
    }
    if (!utf8(r)) {
        return refuse(r, null, 'The request body is not valid UTF-8');
    }
    var carried = carriageProblem(text, body);
    if (carried) {
        return refuse(r, carried[0], carried[1]);
    }
    for (var f = 0; f < STEERING_FIELDS.length; f++) {
        if (body[STEERING_FIELDS[f]] !== undefined) {
            return refuse(r, STEERING_FIELDS[f], '`' + STEERING_FIELDS[f] + '` is set by the ' +
                'gatekeeper, not by clients; leave it out');
        }
    }
    if (body.use_beam_search) {
        return refuse(r, 'use_beam_search', '`use_beam_search` is not served here');
    }
    if (body.prompt_embeds !== undefined) {
        return refuse(r, 'prompt_embeds', '`prompt_embeds` is not served here');
    }
    var problem = sequenceProblem(body, completion) || logprobProblem(body, completion);
    if (problem) {
        return refuse(r, problem[0], problem[1]);
    }
    var schema = schemaBytes(body);
    if (schema > LIMITS.maxSchemaBytes) {
        return refuse(r, 'response_format', LIMITS.maxSchemaBytes === 0
            ? 'Structured outputs (response_format, structured_outputs, tools) are off here'
            : 'Structured-output schemas and tools may be at most ' + LIMITS.maxSchemaBytes +
              ' bytes of JSON; this request has ' + schema);
    }
    var counted = schema > 0 ? countProblem(body) : null;
    if (counted) {
        return refuse(r, counted[0], counted[1]);
    }
    // The API server's named location that takes the request on (the check server's request,
    // and the VM holding the parsed body, end with this answer).
    var suffix = tier(r, body);
    r.headersOut['X-Accel-Redirect'] = schema > 0 ? target + '_schema' + suffix : target + suffix;
    r.return(204);
}

function chat(r) {
    inspect(r, '@chat', false);
}

function completions(r) {
    inspect(r, '@completions', true);
}

// vLLM's JSON 500 (`error_page 500`): vLLM 0.31 writes one for a request that failed on its
// content and for a dead engine alike, so ask the engine itself, uncached. /health is 200 while
// it lives (the request's own failure: a 400) and 503 once it is dead; no answer within the
// bound is a fault too (the restart's 503, which the 5xx alarm counts).
function failed(r) {
    r.subrequest('/.gatekeeper/engine-health', {method: 'GET'}, function (reply) {
        r.internalRedirect(reply.status === 200 ? '@vllm_failed' : '/.gatekeeper/e503');
    });
}

// GET /v1/models, answered here: the served name only, never vLLM's path on disk.
function models(r) {
    r.headersOut['Content-Type'] = 'application/json';
    r.return(200, JSON.stringify({
        object: 'list',
        data: [{id: LIMITS.model, object: 'model', created: 0, owned_by: 'gemma-graviton'}]
    }) + '\n');
}

// Whether `key` and `token` are equal, in a time that does not depend on where they first
// differ (as vLLM's own check compares, with `secrets.compare_digest`).
function same(key, token) {
    var differ = key.length ^ token.length;
    for (var i = 0; i < key.length; i++) {
        differ |= key.charCodeAt(i) ^ token.charCodeAt(i % Math.max(token.length, 1));
    }
    return differ === 0;
}

// `$gatekeeper_key_ok`: "1" when the Authorization header carries a key of the key file (the API
// key's Secret, which the kubelet refreshes in place) whose `until` (Unix seconds; null for the
// current key) is still ahead. Read on every keyed request, so a rotation and the end of its
// overlap take effect without a reload. Anything unreadable accepts nothing. (Keys, not digests:
// the `crypto` module is missing from some njs builds, nginx/njs issue #1049.)
function keyOk(r) {
    var header = r.headersIn.Authorization || '';
    // The scheme is case-insensitive (RFC 9110 section 11.1): `bearer` and `BEARER` are Bearer.
    if (header.slice(0, 7).toLowerCase() !== 'bearer ' || header.length <= 7) {
        return '0';
    }
    var keys;
    try {
        keys = JSON.parse(require('fs').readFileSync(r.variables.gatekeeper_keys_path, 'utf8')).keys;
    } catch (e) {
        return '0';
    }
    if (!Array.isArray(keys)) {
        return '0';
    }
    var token = header.slice(7);
    var now = Date.now() / 1000;
    for (var i = 0; i < keys.length; i++) {
        if (typeof keys[i].key === 'string' && same(keys[i].key, token) &&
            (keys[i].until === null || now < keys[i].until)) {
            return '1';
        }
    }
    return '0';
}

// Body filter of every reply from vLLM: a stream that outlives the reply timeout, or a reply that
// outgrows the reply size, is cut; a stream ends with an error event and [DONE], as vLLM ends its
// own. A one-piece JSON reply is never cut for time: it came within proxy_read_timeout, whole,
// and $request_time also counts the client's upload, so cutting it would drop a finished
// generation under a Content-Length it no longer meets (the client would retry it).
function bound(r, data, flags) {
    if (r.variables.gatekeeper_cut === '1') {
        return;
    }
    var sent = Number(r.variables.gatekeeper_sent || 0) + data.length;
    r.variables.gatekeeper_sent = String(sent);
    var stream = String(r.headersOut['Content-Type'] || '').indexOf('text/event-stream') === 0;
    var late = stream && Number(r.variables.request_time) > LIMITS.replySeconds;
    var big = sent > LIMITS.maxReplyBytes;
    if (flags.last || !(late || big)) {
        r.sendBuffer(data, flags);
        return;
    }
    r.variables.gatekeeper_cut = '1';
    if (!stream) {
        r.sendBuffer('', {last: true});
        return;
    }
    var message = late
        ? 'The reply ran past ' + LIMITS.replySeconds + ' s and was cut'
        : 'The reply grew past ' + LIMITS.maxReplyBytes + ' bytes and was cut';
    var event = {error: {message: message, type: 'timeout_error', code: late ? 504 : 413}};
    r.sendBuffer('data: ' + JSON.stringify(event) + '\n\ndata: [DONE]\n\n', {last: true});
}

export default {
    chat: chat, completions: completions, models: models, bound: bound, keyOk: keyOk,
    failed: failed
};
