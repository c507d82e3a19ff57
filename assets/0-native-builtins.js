/* skewlab dashboard: put back the browser's own String#trim (and trimStart/End/Left/Right), parseInt,
 * parseFloat, Math.sinh and Function#toString, saved by an inline script in the page (dashboard/app.py,
 * _SAVE_NATIVES) before Dash's @babel/polyfill (core-js 2) replaced them with slow regex-based versions
 * (core-js 2 still treats U+180E as white space, so it replaces them in every current browser).
 * Assets load in name order after the polyfill and before plotly.js and dash-renderer. */
(function () {
  var n = window.__skewlabNatives;
  if (!n) { return; }
  var def = function (obj, key, fn) {
    if (typeof fn === "function" && obj[key] !== fn) {
      Object.defineProperty(obj, key, {value: fn, writable: true, configurable: true, enumerable: false});
    }
  };
  ["trim", "trimStart", "trimEnd", "trimLeft", "trimRight"].forEach(function (k) { def(n.s, k, n[k]); });
  def(window, "parseInt", n.parseInt);
  def(window, "parseFloat", n.parseFloat);
  def(Number, "parseInt", n.parseInt);
  def(Number, "parseFloat", n.parseFloat);
  def(Math, "sinh", n.sinh);
  def(Function.prototype, "toString", n.toString);
  delete window.__skewlabNatives;
})();
