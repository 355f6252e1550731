document.addEventListener("DOMContentLoaded", () => {
  const p = document.createElement("p");
  p.textContent = "JavaScript came as a prepackaged answer too.";
  document.body.appendChild(p);
});
