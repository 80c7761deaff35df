// The plan page, back from Stripe Checkout: look again until Stripe's webhook has confirmed
// the payment (the server stops asking after a couple of minutes and says so).
(() => {
  const notice = document.getElementById("checkout-notice");
  const url = notice && notice.dataset.refreshUrl;
  if (!url) return;
  const seconds = Number(notice.dataset.refreshSeconds) || 3;
  window.setTimeout(() => window.location.replace(url), seconds * 1000);
})();
