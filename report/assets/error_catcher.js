(function () {
  'use strict';
  var pending = [];
  function report(message) {
    var box = document.getElementById('errors');
    if (!box) { pending.push(message); return; }
    box.hidden = false;
    var line = document.createElement('div');
    line.textContent = String(message);
    box.appendChild(line);
  }
  window.profctlReportError = report;
  window.addEventListener('error', function (e) {
    if (e.target && e.target !== window && e.target.tagName) {
      report('failed to load <' + e.target.tagName.toLowerCase() + '>');
    } else {
      report('error: ' + (e.message || 'unknown') + (e.lineno ? ' (line ' + e.lineno + ')' : ''));
    }
  }, true);
  window.addEventListener('unhandledrejection', function (e) { report('unhandled rejection: ' + e.reason); });
  document.addEventListener('securitypolicyviolation', function (e) {
    report('blocked by the page policy: ' + e.violatedDirective + ' ' + e.blockedURI);
  });
  var consoleError = console.error;
  console.error = function () {
    report('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return consoleError.apply(console, arguments);
  };
  document.addEventListener('DOMContentLoaded', function () {
    var queued = pending;
    pending = [];
    queued.forEach(report);
  });
})();
