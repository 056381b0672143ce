{
  description = "Trust Resolution and Reliance Receipt Service: development shell";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.11";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" "x86_64-darwin" "aarch64-darwin" ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in {
      devShells = forAll (pkgs: {
        default = pkgs.mkShell {
          packages = [ pkgs.nodejs_22 pkgs.postgresql_15 pkgs.redis ];
          shellHook = ''
            echo "node $(node --version), $(postgres --version)"
            echo "npm install && npm start   # serve on the embedded database"
            echo "npm install && npm test    # run the suite (start PostgreSQL on 127.0.0.1:5432 to include it)"
          '';
        };
      });
    };
}
