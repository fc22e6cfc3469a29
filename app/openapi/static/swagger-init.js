// Starts Swagger UI on /docs from files served by Engram itself: no CDN, no inline script.
window.addEventListener("load", function () {
  "use strict";
  var node = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: node.getAttribute("data-url"),
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
