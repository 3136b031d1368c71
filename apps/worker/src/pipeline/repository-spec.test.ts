import { isSafeBranchName } from "@tern/core";
import { describe, expect, it } from "vitest";
import { gitServicesOf, repositorySpecOf } from "./repository-spec.ts";

describe("repositorySpecOf", () => {
  it("accepts owner/repo and a branch", () => {
    expect(repositorySpecOf({ selected_repository: "acme/app.js", selected_branch: "feature/x" })).toEqual({
      fullName: "acme/app.js",
      name: "app.js",
      branch: "feature/x",
      provider: "github",
    });
  });

  it("is null without a repository", () => {
    expect(repositorySpecOf({})).toBeNull();
    expect(repositorySpecOf({ selected_repository: "" })).toBeNull();
  });

  it.each([
    "--upload-pack=touch /tmp/pwned",
    "acme/--upload-pack=x",
    "-acme/app",
    "acme/../etc",
    "../acme",
    "acme",
    "acme/app/extra",
    "https://evil.example/acme/app",
    "acme/app:1",
    "ext::sh -c touch% /tmp/pwned",
    "acme /app",
  ])("refuses the repository %s", (name) => {
    expect(() => repositorySpecOf({ selected_repository: name })).toThrow(/invalid repository name/);
  });

  it("lets GitLab nest groups", () => {
    expect(repositorySpecOf({ selected_repository: "g/sub/app", git_provider: "gitlab" })?.name).toBe("app");
  });

  it.each(["-b", "--upload-pack=x", "a..b", "a:b", "a b", "/x", "x/", "x.lock", "@", "a@{1}", ".hidden"])(
    "refuses the branch %s",
    (branch) => {
      expect(isSafeBranchName(branch)).toBe(false);
      expect(() => repositorySpecOf({ selected_repository: "acme/app", selected_branch: branch })).toThrow(
        /invalid branch name/,
      );
    },
  );
});

describe("git hosts", () => {
  it("names every git host a clone may come from, with its port, for the sandboxes' egress rules", () => {
    expect(
      gitServicesOf({
        GIT_BASE_URL: "http://[fd00::5]:8080",
        GIT_BASE_URL_GITHUB: "https://github.com/",
        GIT_BASE_URL_GITLAB: "https://git.internal:8443/group",
        GIT_BASE_URL_BITBUCKET: "https://github.com",
      }),
    ).toEqual([
      { host: "fd00::5", port: 8080 },
      { host: "github.com", port: 443 },
      { host: "git.internal", port: 8443 },
    ]);
  });
});
