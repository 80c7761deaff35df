// Copy the freshly created key, and drop the POST from history so a reload shows the
// plain list (the plaintext is never shown twice).
(function () {
  var button = document.getElementById("copy-key");
  if (button) {
    button.addEventListener("click", function () {
      var text = document.getElementById(button.dataset.copyTarget).textContent.trim();
      var done = function () { button.textContent = "Copied"; };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () { selectText(); });
      } else {
        selectText();
        try { document.execCommand("copy"); done(); } catch (e) { /* selected for manual copy */ }
      }
      function selectText() {
        var range = document.createRange();
        range.selectNodeContents(document.getElementById(button.dataset.copyTarget));
        var selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
      }
    });
  }
  if (window.history && window.history.replaceState) {
    window.history.replaceState(null, "", window.location.pathname);
  }
})();
