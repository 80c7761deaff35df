// Copy the freshly created key, hand it to this tab's API explorer, and drop the POST from history so a reload shows the
// plain list (the plaintext is never shown twice).
(function () {
  // The API explorer of this tab may use the new key without a paste (it reads the same
  // entry of this tab's sessionStorage; closing the tab forgets it).
  var created = document.getElementById("plaintext-key");
  if (created && created.dataset.lookup && window.sessionStorage) {
    try {
      sessionStorage.setItem("mdp-explorer-key:" + created.dataset.lookup, created.textContent.trim());
    } catch (e) { /* storage refused: the explorer asks for a paste */ }
  }
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
