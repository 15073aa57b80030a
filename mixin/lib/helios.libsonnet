// Helpers of the Helios mixin: Prometheus durations, the number formats of the Python rule
// generator (alerts/), and a YAML writer that writes rule files exactly as alerts/render.py does
// (PyYAML, block style, two-space indented sequences), so that the default _config renders the
// shipped alerts/*.yaml byte for byte (tests/mixin/test_mixin.py).
local units = { w: 604800, d: 86400, h: 3600, m: 60, s: 1 };
local digits = '0123456789';

{
  // '1h30m' -> 5400. Units w, d, h, m, s, each at most once and in that order, as in
  // alerts/config.yaml; anything else is an error naming the value.
  seconds(d)::
    local bad = error 'not a duration (like 90s, 15m or 3h): ' + std.toString(d);
    local rankOf(ch) = std.find(ch, std.stringChars('wdhms'));
    local step(state, ch) =
      if std.member(digits, ch) then state { num: state.num + ch }
      else if std.objectHas(units, ch) && state.num != '' && rankOf(ch)[0] > state.last then
        { num: '', total: state.total + std.parseInt(state.num) * units[ch], last: rankOf(ch)[0] }
      else bad;
    local end = if std.isString(d) then std.foldl(step, std.stringChars(d), { num: '', total: 0, last: -1 }) else bad;
    if end.num != '' || end.last < 0 then bad else end.total,

  // 5400 -> '1h30m', 0 -> '0s' (alerts/promql.py: duration).
  duration(s)::
    local parts = [
      [std.floor(s / 3600), 'h'],
      [std.floor((s % 3600) / 60), 'm'],
      [s % 60, 's'],
    ];
    local text = std.join('', [std.toString(p[0]) + p[1] for p in parts if p[0] > 0]);
    if text == '' then '0s' else text,

  // Python's '{:g}' and '{:.0%}' (alerts/promql.py num, the descriptions' percentages).
  num(x):: std.format('%g', x),
  pct(x):: std.format('%.0f', x * 100) + '%',

  // `for:` only when longer than 0 (Prometheus: fire on the first matching evaluation).
  forField(d):: if $.seconds(d) > 0 then { 'for': d } else {},

  // The rule groups without the alerts _config.enabled turns off; a group left empty goes.
  enabledGroups(c, groups)::
    local keep(r) = !std.objectHas(r, 'alert') || c.enabled[r.alert];
    [g { rules: std.filter(keep, g.rules) } for g in groups if std.length(std.filter(keep, g.rules)) > 0],

  // ---- YAML, as PyYAML writes alerts/*.yaml -------------------------------------------------
  // Key order of the rule files (jsonnet objects have none of their own): these first, in this
  // order, then any other key alphabetically.
  keyOrder:: ['groups', 'name', 'interval', 'limit', 'rules', 'alert', 'record', 'expr', 'for',
              'keep_firing_for', 'labels', 'annotations', 'severity', 'summary', 'description',
              'runbook_url'],

  // Lookups are objects: std.member, std.find and std.format are jsonnet code, slow in a loop.
  local set(items) = { [x]: true for x in items },
  local ranks = { [$.keyOrder[i]]: std.substr(std.toString(1000 + i), 1, 3) for i in std.range(0, std.length($.keyOrder) - 1) },
  local keys(o) = std.sort(std.objectFields(o), function(k) if std.objectHas(ranks, k) then ranks[k] else '999' + k),

  // C++ jsonnet's std.strReplace is native and quick; std.findSubstr and per-character
  // filters are slow on long strings, so every test below is written with strReplace.
  local has(s, part) = std.length(std.strReplace(s, part, '')) != std.length(s),
  local controls = [std.char(n) for n in std.range(0, 31) if n != 10]
                   + [std.char(n) for n in std.range(127, 159)] + [std.char(65279)],
  local hasSpecial(s) = std.length([ch for ch in controls if has(s, ch)]) > 0,

  local numberChars = set(std.stringChars('0123456789+-._:xXoOabcdefABCDEF')),
  local numberStart = set(std.stringChars('0123456789+-.')),
  local digitSet = set(std.stringChars(digits)),
  local indicators = set(std.stringChars("-?:,[]{}#&*!|>'\"%@`")),
  local reserved = set(['yes', 'Yes', 'YES', 'no', 'No', 'NO', 'true', 'True', 'TRUE', 'false',
                        'False', 'FALSE', 'on', 'On', 'ON', 'off', 'Off', 'OFF', '~', 'null', 'Null',
                        'NULL', '=', '<<', '.inf', '.Inf', '.INF', '.nan', '.NaN', '.NAN']),
  local numberish(s) =
    std.objectHas(numberStart, s[0])
    && std.length([ch for ch in std.stringChars(s) if !std.objectHas(numberChars, ch)]) == 0,
  local datelike(s) =
    std.length(s) >= 5 && s[4] == '-'
    && std.length([ch for ch in std.stringChars(std.substr(s, 0, 4)) if std.objectHas(digitSet, ch)]) == 4,

  // A plain scalar that PyYAML would also write plain, or else quoting: never a string that
  // YAML reads back as another type (bool, null, number, timestamp).
  local plain(s) =
    local n = std.length(s);
    n > 0
    && s[0] != ' ' && s[n - 1] != ' '
    && !std.objectHas(indicators, s[0])
    && !std.startsWith(s, '...')
    && !has(s, ': ') && !std.endsWith(s, ':')
    && !has(s, ' #')
    && !std.objectHas(reserved, s)
    && !numberish(s)
    && !datelike(s),

  local scalar(v) =
    if std.isString(v) then
      if plain(v) && !hasSpecial(v) then v
      else if hasSpecial(v) then std.escapeStringJson(v)
      else "'" + std.strReplace(v, "'", "''") + "'"
    else if std.isBoolean(v) then (if v then 'true' else 'false')
    else if std.isNumber(v) then std.toString(v)
    else if v == null then 'null'
    else error 'not a scalar: ' + std.toString(v),

  local pads = [std.join('', std.makeArray(n, function(_) ' ')) for n in std.range(0, 64)],
  local pad(n) = pads[n],

  local multiline(v) =
    std.isString(v) && has(v, '\n') && !hasSpecial(v) && !has(v, ' \n'),

  // `key: |-` and the text's lines `indent` deeper (PyYAML's literal block and its hints).
  local literal(head, v, indent) =
    local chomp = if !std.endsWith(v, '\n') then '-' else if std.endsWith(v, '\n\n') then '+' else '';
    local hint = if std.startsWith(v, ' ') || std.startsWith(v, '\n') then '2' else '';
    local body = if chomp == '' then std.substr(v, 0, std.length(v) - 1) else v;
    [head + '|' + hint + chomp] + [if l == '' then '' else pad(indent) + l for l in std.split(body, '\n')],

  local node(head, v, indent) =
    if std.isObject(v) then
      if std.length(std.objectFields(v)) == 0 then [head + ' {}'] else [head] + mapping(v, indent)
    else if std.isArray(v) then
      if std.length(v) == 0 then [head + ' []'] else [head] + sequence(v, indent)
    else if multiline(v) then literal(head + ' ', v, indent)
    else [head + ' ' + scalar(v)],

  local mapping(o, indent) =
    std.join([], [node(pad(indent) + scalar(k) + ':', o[k], indent + 2) for k in keys(o)]),

  local sequence(a, indent) =
    std.flattenArrays([
      if std.isObject(v) && std.length(std.objectFields(v)) > 0 then
        local lines = mapping(v, indent + 2);
        [pad(indent) + '- ' + std.substr(lines[0], indent + 2, std.length(lines[0]))] + lines[1:]
      else
        local lines = node(pad(indent) + '-', v, indent + 2);
        lines
      for v in a
    ]),

  // A rule file's text: `header` (comment lines, each ending in a newline), then the document.
  // Without the last newline: `jsonnet -S` adds it.
  manifestRules(doc, header='')::
    header + std.join('\n', mapping(doc, 0)),
}
