// The door of an elastic stack (components/manifests/asleep.py), spliced into gatekeeper.js by
// gatekeeper_conf.njs_script, and only at the door: a request that finds no group is told when
// to come back (`asleep`); /health says asleep and wakes nothing.
function asleep(r) {
    r.variables.gatekeeper_asleep = '1';
    var seconds = LIMITS.wakeSeconds;
    var by = new Date(Date.now() + seconds * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
    r.headersOut['Retry-After'] = String(seconds);
    error(r, 503, 'service_unavailable_error', 'The model is asleep (no group is running) and ' +
        'is waking up for this request: expect it by ' + by + ' (within ' + seconds + ' s); ' +
        'retry after that');
}

function asleepHealth(r) {
    r.variables.gatekeeper_asleep = '1';
    r.headersOut['Content-Type'] = 'application/json';
    r.headersOut['Retry-After'] = String(LIMITS.wakeSeconds);
    r.return(503, JSON.stringify({
        status: 'asleep',
        message: 'No group is running: the model sleeps until a model request wakes it ' +
            '(within ' + LIMITS.wakeSeconds + ' s of that request); the front door is up',
        wake_seconds: LIMITS.wakeSeconds
    }) + '\n');
}

