/* The API explorer: Swagger UI with the operations' code samples (x-codeSamples, written
   into the OpenAPI document by config.api.schema.code_samples), no "Try it out" where the
   document says an operation cannot be tried (the live feed never finishes), and the API
   key kept in this tab's sessionStorage: pasted once, or chosen among the signed-in
   customer's keys once this tab holds them. The key never goes to our server except as
   the Authorization header of the requests tried. */
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("explorer-config").textContent);
  const KEY_PATTERN = /^mdp_live_[0-9A-Za-z]{50}$/;
  const CURRENT = "mdp-explorer-key";
  const storedKey = (lookup) => sessionStorage.getItem(`${CURRENT}:${lookup}`);

  function CodeSamples(props) {
    const React = props.React;
    const [chosen, choose] = React.useState(0);
    const [copied, setCopied] = React.useState(false);
    const samples = props.samples;
    const sample = samples[chosen];
    const copy = () => navigator.clipboard.writeText(sample.source).then(() => {
      setCopied(true);
      setTimeout(() => setCopied(false), 1500);
    }, () => {});
    return React.createElement("div", {className: "code-samples"},
      React.createElement("div", {className: "code-samples__tabs", role: "tablist"},
        samples.map((s, n) => React.createElement("button", {
          key: s.label, type: "button", role: "tab", "aria-selected": n === chosen ? "true" : "false",
          className: "code-samples__tab", onClick: () => choose(n)}, s.label)),
        React.createElement("button", {type: "button", className: "code-samples__copy", onClick: copy},
          copied ? "Copied" : "Copy")),
      React.createElement("pre", {className: "code-samples__source"},
        React.createElement("code", {"data-lang": sample.lang}, sample.source)),
      React.createElement("p", {className: "code-samples__note"},
        "Set API_KEY in your environment first: export API_KEY=mdp_live_…"));
  }

  function operation(system, path, method) {
    return system.specSelectors.specJson().getIn(["paths", path, method]);
  }

  const ExplorerPlugin = (system) => ({
    statePlugins: {
      spec: {
        wrapSelectors: {
          allowTryItOutFor: (original) => (state, path, method) => {
            const op = state.getIn(["json", "paths", path, method]);
            return op && op.get("x-explorer-no-try-it-out") ? false : original(path, method);
          },
        },
      },
    },
    wrapComponents: {
      parameters: (Original, sys) => (props) => {
        const [path, method] = props.pathMethod || [];
        const op = path ? operation(sys, path, method) : null;
        const samples = op && op.get("x-codeSamples");
        const React = sys.React;
        const parts = [React.createElement(Original, Object.assign({key: "parameters"}, props))];
        if (op && op.get("x-explorer-no-try-it-out")) {
          parts.unshift(React.createElement("p", {key: "no-try", className: "no-try-it-out"},
            "A live stream does not finish, so it is not tried here: run one of the snippets below."));
        }
        if (samples && samples.size) {
          parts.push(React.createElement(CodeSamples, {key: "samples", React, samples: samples.toJS()}));
        }
        return React.createElement("div", null, parts);
      },
    },
  });

  // -- the key ------------------------------------------------------------------------------
  const state = document.getElementById("key-state");
  const paste = document.getElementById("key-paste");
  const choice = document.getElementById("key-choice");
  let ui = null;

  function say(text) { state.textContent = text; }

  function apply(key) {
    if (ui) ui.preauthorizeApiKey("ApiKey", key);
    sessionStorage.setItem(CURRENT, key);
    sessionStorage.setItem(`${CURRENT}:${key.slice(9, 21)}`, key);
    if (choice) choice.value = [...choice.options].some((o) => o.value === key.slice(9, 21)) ? key.slice(9, 21) : "";
    say(`Using mdp_live_${key.slice(9, 21)}… in this tab.`);
  }

  function usePasted() {
    const key = paste.value.trim();
    if (!KEY_PATTERN.test(key)) {
      say("That is not an API key: mdp_live_ and 50 letters or digits.");
      return;
    }
    if (choice && choice.value && key.slice(9, 21) !== choice.value) {
      say(`That key is not ${choice.options[choice.selectedIndex].text}.`);
      return;
    }
    paste.value = "";
    apply(key);
  }

  document.getElementById("key-use").addEventListener("click", usePasted);
  paste.addEventListener("keydown", (event) => { if (event.key === "Enter") usePasted(); });
  document.getElementById("key-forget").addEventListener("click", () => {
    for (const name of Object.keys(sessionStorage)) {
      if (name.startsWith(CURRENT)) sessionStorage.removeItem(name);
    }
    if (ui) ui.authActions.logout(["ApiKey"]);
    if (choice) choice.value = "";
    say("No key: requests tried here are refused with 401.");
  });
  if (choice) {
    choice.addEventListener("change", () => {
      const lookup = choice.value;
      if (!lookup) return;
      const key = storedKey(lookup);
      if (key) {
        apply(key);
      } else {
        say("Paste this key once; this tab keeps it until it closes.");
        paste.focus();
      }
    });
  }

  ui = SwaggerUIBundle({
    url: config.schema_url,
    dom_id: "#swagger-ui",
    presets: [SwaggerUIBundle.presets.apis],
    plugins: [ExplorerPlugin],
    layout: "BaseLayout",
    deepLinking: true,
    displayRequestDuration: true,
    defaultModelsExpandDepth: 0,
    onComplete: () => {
      const key = sessionStorage.getItem(CURRENT);
      if (key && KEY_PATTERN.test(key)) apply(key);
      else say(config.signed_in ? "Choose one of your keys, or paste one." : "Paste an API key to try requests.");
    },
  });
  window.explorer = ui;
})();
